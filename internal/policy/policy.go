// Package policy is xdsd's authorization policy (--policy FILE): which
// client identities may receive which resources, and which TP2 dynamic
// parameter values they may claim. Once a policy is given, everything it
// does not allow is denied.
//
//	rules:
//	- clients: ["spiffe://example.org/ns/prod/*"]  # globs over identities; omitted = every client, anonymous ones too
//	  types: [lds, rds, cds, eds]                  # aliases or type URLs; omitted = every type
//	  names: ["*"]                                 # globs over resource names; omitted = every name
//	  params: {env: [prod]}                        # values these clients may claim; omitted = any
//	  assign: {env: prod}                          # parameters the server sets for these clients
//	  csds: all                                    # CSDS shows these clients every node (default: their own identity's)
//	- clients: ["spiffe://example.org/ns/ops/*"]
//	  admin: write                                 # read or write: an admin rule, for the admin API only
//
// A glob's "*" matches any run of characters, "/" included; everything
// else matches itself. An identity is the URI SAN of a verified client
// certificate (internal/mtls); a client without one has the identity "",
// which only a rule without "clients" covers.
//
// An admin rule (one with "admin") makes the certificates of its clients
// admin credentials: read (GET requests) or write (everything). It grants
// nothing over xDS, and takes only "clients", which it needs (an admin
// role for every client, anonymous ones included, would undo the admin
// API's credentials). Without an admin rule a workload certificate is no
// admin credential.
//
// Parameters: a client may claim k=v when a rule covering it lists v
// (a glob) for k, or when no rule covering it lists values for k at all (a
// rule's params restrict only the parameters it names). A client no rule
// covers may claim nothing.
//
// Assigned parameters: the parameters a rule assigns are set, for every
// client the rule covers, on every subscription and in the parameters
// taken from node metadata, whatever the client claims or omits; a claim
// of another value for an assigned parameter is refused. This is how a
// policy requires a value rather than only restricting the values that
// may be claimed: a TP2 constraint "env!=test" also matches a client that
// sends no env at all. Two rules that could cover one identity may not
// assign different values to one parameter: Parse refuses the policy,
// naming both rules. Whether two rules could cover one identity is
// decided from their patterns alone (a rule without clients covers every
// identity; two globs overlap when some identity matches both), so a
// conflict is found when the policy loads, not when a client connects.
//
// A rule whose only fields are clients and assign or csds allows no
// resources: it assigns parameters or grants CSDS to the clients it
// covers, and other rules say what they may receive. (A rule of clients
// alone still allows everything, as before these fields existed.)
package policy

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/xdsd/xdsd/resource"
)

// Policy is a parsed policy. The zero value denies everything.
type Policy struct {
	rules []rule
}

type rule struct {
	clients []string            // globs; nil: every client
	types   []string            // type URLs; nil: every type
	names   []string            // globs; nil: every name
	params  map[string][]string // globs of values by parameter; nil: any
	admin   string              // "read" or "write": an admin rule, which grants nothing over xDS
	assign  map[string]string   // parameters set for the clients covered
	csdsAll bool                // CSDS shows the clients covered every node
	// grantOnly: the rule has only clients and assign or csds, and allows
	// no resources.
	grantOnly bool
	at        string // "rules[i] (file:line)", for errors naming the rule
}

// Reasons a subscription is denied, as xdsd_denied_total{reason} counts
// them.
const (
	// ReasonClient: no rule covers the client's identity.
	ReasonClient = "client"
	// ReasonType: no rule covering the client allows the type.
	ReasonType = "type"
	// ReasonName: rules allow the type, but not the name.
	ReasonName = "name"
	// ReasonParam: the client claimed a parameter value it may not.
	ReasonParam = "param"
)

// Load reads and parses a policy file.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse parses a policy; errors name file, line, column and field.
func Parse(data []byte, file string) (*Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty policy: want a mapping with \"rules\"", file)
	}
	root := doc.Content[0]
	perr := func(n *yaml.Node, path, format string, args ...any) error {
		return fmt.Errorf("%s:%d:%d: %s: %s", file, n.Line, n.Column, path, fmt.Sprintf(format, args...))
	}
	if root.Kind != yaml.MappingNode {
		return nil, perr(root, "policy", "want a mapping with \"rules\"")
	}
	p := &Policy{}
	var rulesNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "rules" {
			return nil, perr(k, k.Value, "unknown field (want \"rules\")")
		}
		rulesNode = v
	}
	if rulesNode == nil {
		return nil, perr(root, "policy", "no \"rules\"")
	}
	if rulesNode.Kind != yaml.SequenceNode {
		return nil, perr(rulesNode, "rules", "want a list of rules")
	}
	for i, rn := range rulesNode.Content {
		path := fmt.Sprintf("rules[%d]", i)
		if rn.Kind != yaml.MappingNode {
			return nil, perr(rn, path, "want a mapping (clients, types, names, params)")
		}
		r := rule{at: fmt.Sprintf("%s (%s:%d)", path, file, rn.Line)}
		resources := false
		for j := 0; j+1 < len(rn.Content); j += 2 {
			k, v := rn.Content[j], rn.Content[j+1]
			fp := path + "." + k.Value
			var err error
			switch k.Value {
			case "clients":
				r.clients, err = stringList(v, fp, perr)
			case "names":
				r.names, err = stringList(v, fp, perr)
			case "types":
				var ts []string
				if ts, err = stringList(v, fp, perr); err == nil {
					for n, t := range ts {
						typ, lerr := resource.Lookup(t)
						if lerr != nil {
							return nil, perr(v.Content[n], fmt.Sprintf("%s[%d]", fp, n), "%v", lerr)
						}
						r.types = append(r.types, typ.URL)
					}
				}
			case "params":
				r.params, err = paramMap(v, fp, perr)
			case "admin":
				if v.Kind != yaml.ScalarNode || (v.Value != AdminRead && v.Value != AdminWrite) {
					err = perr(v, fp, "want read or write")
				}
				r.admin = v.Value
			case "assign":
				r.assign, err = assignMap(v, fp, perr)
			case "csds":
				if v.Kind != yaml.ScalarNode || (v.Value != "all" && v.Value != "own") {
					err = perr(v, fp, "want \"all\" (CSDS shows these clients every node) or \"own\" (only their own identity's, the default)")
				}
				r.csdsAll = v.Value == "all"
			default:
				err = perr(k, fp, "unknown field (want clients, types, names, params, assign, csds or admin)")
			}
			switch k.Value {
			case "types", "names", "params":
				resources = true
			}
			if err != nil {
				return nil, err
			}
		}
		if err := r.checkAdmin(rn, path, perr); err != nil {
			return nil, err
		}
		r.grantOnly = !resources && (r.assign != nil || r.csdsAll)
		p.rules = append(p.rules, r)
	}
	if err := p.checkAssignments(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// The admin roles an admin rule gives.
const (
	AdminRead  = "read"
	AdminWrite = "write"
)

// checkAdmin holds an admin rule to its own fields: clients, needed, and
// nothing that grants over xDS.
func (r *rule) checkAdmin(n *yaml.Node, path string, perr perrFunc) error {
	if r.admin == "" {
		return nil
	}
	if r.clients == nil {
		return perr(n, path, "an admin rule needs \"clients\" (without it every client, anonymous ones too, would be an admin)")
	}
	if r.types != nil || r.names != nil || r.params != nil || r.assign != nil || r.csdsAll {
		return perr(n, path, "an admin rule grants the admin API only: give types, names, params, assign and csds in a rule of their own")
	}
	return nil
}

// assignMap reads a rule's assign: parameter names to single values.
func assignMap(n *yaml.Node, path string, perr perrFunc) (map[string]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, perr(n, path, "want a mapping of parameter names to values, e.g. {env: test}")
	}
	if len(n.Content) == 0 {
		return nil, perr(n, path, "empty: it would assign nothing (omit the field)")
	}
	m := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, perr(v, path+"."+k.Value, "want one value (a string): an assigned parameter has exactly one")
		}
		if k.Value == "" {
			return nil, perr(k, path, "empty parameter name")
		}
		m[k.Value] = v.Value
	}
	return m, nil
}

// checkAssignments refuses two rules that could cover one identity and
// assign different values to one parameter.
func (p *Policy) checkAssignments() error {
	for i := range p.rules {
		a := &p.rules[i]
		for j := i + 1; j < len(p.rules); j++ {
			b := &p.rules[j]
			if a.assign == nil || b.assign == nil {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(a.assign)) {
				bv, ok := b.assign[k]
				if !ok || bv == a.assign[k] {
					continue
				}
				if who, overlap := coverOverlap(a.clients, b.clients); overlap {
					return fmt.Errorf("%s assigns %s=%q and %s assigns %s=%q, and both cover %s: "+
						"make their clients disjoint, or assign one value", a.at, k, a.assign[k], b.at, k, bv, who)
				}
			}
		}
	}
	return nil
}

// Admin is the admin role the policy gives a certificate identity:
// AdminWrite, AdminRead or "" (none), the highest of its admin rules'.
func (p *Policy) Admin(identity string) string {
	role := ""
	for i := range p.rules {
		r := &p.rules[i]
		if r.admin == "" || !r.covers(identity) {
			continue
		}
		if r.admin == AdminWrite {
			return AdminWrite
		}
		role = r.admin
	}
	return role
}

// HasAdminRoles reports whether the policy has an admin rule.
func (p *Policy) HasAdminRoles() bool {
	return slices.ContainsFunc(p.rules, func(r rule) bool { return r.admin != "" })

}

// coverOverlap reports whether some identity could be covered by two
// rules' clients (nil: every identity, the anonymous one included), and
// describes one such set of identities.
func coverOverlap(a, b []string) (string, bool) {
	switch {
	case a == nil && b == nil:
		return "every client", true
	case a == nil || b == nil:
		globs := a
		if a == nil {
			globs = b
		}
		for _, g := range globs {
			if g != "" {
				return fmt.Sprintf("the identities matching %q", g), true
			}
		}
		return "", false
	}
	for _, ga := range a {
		for _, gb := range b {
			if globsOverlap(ga, gb) {
				return fmt.Sprintf("the identities matching both %q and %q", ga, gb), true
			}
		}
	}
	return "", false
}

// globsOverlap reports whether some non-empty identity (the anonymous
// one, "", is covered only by rules without clients) matches both globs.
func globsOverlap(a, b string) bool {
	if !globsIntersect(a, b) {
		return false
	}
	// Every string both match is non-empty when either has a literal
	// character; globs of stars alone share "x" unless one is "".
	literal := func(g string) bool { return strings.Trim(g, "*") != "" }
	return literal(a) || literal(b) || (a != "" && b != "")
}

// globsIntersect reports whether some string matches both globs, by
// walking both at once: a star may take nothing, or the other side's next
// character (or star), in time len(a)*len(b).
func globsIntersect(a, b string) bool {
	seen := make([]bool, (len(a)+1)*(len(b)+1))
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		if seen[i*(len(b)+1)+j] {
			return false // already explored, and it failed
		}
		seen[i*(len(b)+1)+j] = true
		switch {
		case i == len(a) && j == len(b):
			return true
		case i < len(a) && a[i] == '*':
			return walk(i+1, j) || (j < len(b) && walk(i, j+1))
		case j < len(b) && b[j] == '*':
			return walk(i, j+1) || (i < len(a) && walk(i+1, j))
		case i < len(a) && j < len(b):
			return a[i] == b[j] && walk(i+1, j+1)
		}
		return false
	}
	return walk(0, 0)
}

type perrFunc func(n *yaml.Node, path, format string, args ...any) error

// stringList reads a list of strings; an empty list is an error (it would
// match nothing, which omitting the rule says better).
func stringList(n *yaml.Node, path string, perr perrFunc) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, perr(n, path, "want a list of strings")
	}
	if len(n.Content) == 0 {
		return nil, perr(n, path, "empty list: it would match nothing (omit the field to match everything)")
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return nil, perr(c, fmt.Sprintf("%s[%d]", path, i), "want a string")
		}
		out = append(out, c.Value)
	}
	return out, nil
}

func paramMap(n *yaml.Node, path string, perr perrFunc) (map[string][]string, error) {
	if n.Kind != yaml.MappingNode {
		return nil, perr(n, path, "want a mapping of parameter names to lists of values")
	}
	m := map[string][]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		vs, err := stringList(v, path+"."+k.Value, perr)
		if err != nil {
			return nil, err
		}
		m[k.Value] = vs
	}
	return m, nil
}

// match reports whether s matches glob g ("*": any run of characters),
// in time linear in len(g)*len(s) at worst: on a mismatch it backtracks
// only to the last star, letting it take one more character.
func match(g, s string) bool {
	gi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, si
			gi++
		case gi < len(g) && g[gi] == s[si]:
			gi++
			si++
		case star >= 0:
			mark++
			gi, si = star+1, mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}

func matchAny(globs []string, s string) bool {
	return slices.ContainsFunc(globs, func(g string) bool { return match(g, s) })
}

func (r *rule) covers(identity string) bool {
	if r.clients == nil {
		return true
	}
	return identity != "" && matchAny(r.clients, identity)
}

func (r *rule) allowsType(typeURL string) bool {
	return !r.grantOnly && (r.types == nil || slices.Contains(r.types, typeURL))
}

func (r *rule) allowsName(name string) bool {
	return r.names == nil || matchAny(r.names, name)
}

// Allow says whether the client identity may receive the resource typeURL
// name: "" if it may, or the reason it may not (ReasonClient, ReasonType,
// ReasonName).
func (p *Policy) Allow(identity, typeURL, name string) string {
	reason := ReasonClient
	for i := range p.rules {
		r := &p.rules[i]
		if r.admin != "" || !r.covers(identity) {
			continue
		}
		if !r.allowsType(typeURL) {
			if reason == ReasonClient {
				reason = ReasonType
			}
			continue
		}
		if r.allowsName(name) {
			return ""
		}
		reason = ReasonName
	}
	return reason
}

// ClaimError is a parameter value a client may not claim.
type ClaimError struct {
	Identity, Param, Value string
	// Assigned is the value the policy assigns the client, when it does
	// (HasAssigned).
	Assigned    string
	HasAssigned bool
}

func (e *ClaimError) Error() string {
	who := e.Identity
	if who == "" {
		who = "a client without a certificate identity"
	}
	if e.HasAssigned {
		return fmt.Sprintf("dynamic parameter %s=%q: the policy assigns %s %s=%q; claim that value or none", e.Param, e.Value, who, e.Param, e.Assigned)
	}
	return fmt.Sprintf("dynamic parameter %s=%q: %s may not claim it (policy)", e.Param, e.Value, who)
}

// Claim checks the parameters a client claims (its node metadata's, or a
// TP2 locator's): nil, or a *ClaimError naming the first parameter, in
// name order, it may not claim. A parameter the policy assigns the client
// may be claimed with its assigned value only.
func (p *Policy) Claim(identity string, params map[string]string) error {
	if len(params) == 0 {
		return nil
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	assigned := p.Assigned(identity)
	for _, k := range keys {
		if a, ok := assigned[k]; ok {
			if params[k] != a {
				return &ClaimError{Identity: identity, Param: k, Value: params[k], Assigned: a, HasAssigned: true}
			}
			continue
		}
		if !p.mayClaim(identity, k, params[k]) {
			return &ClaimError{Identity: identity, Param: k, Value: params[k]}
		}
	}
	return nil
}

// Assigned returns the parameters the policy sets for identity (nil when
// none): the union of the assign of every rule covering it, which Parse
// made sure agree.
func (p *Policy) Assigned(identity string) map[string]string {
	var out map[string]string
	for i := range p.rules {
		r := &p.rules[i]
		if r.assign == nil || !r.covers(identity) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(r.assign))
		}
		maps.Copy(out, r.assign)
	}
	return out
}

// CSDSAll reports whether identity may see every connected client in
// CSDS (a rule covering it says csds: all), rather than only the clients
// of its own identity.
func (p *Policy) CSDSAll(identity string) bool {
	for i := range p.rules {
		if r := &p.rules[i]; r.csdsAll && r.covers(identity) {
			return true
		}
	}
	return false
}

func (p *Policy) mayClaim(identity, k, v string) bool {
	covered, restricted := false, false
	for i := range p.rules {
		r := &p.rules[i]
		if r.admin != "" || !r.covers(identity) {
			continue
		}
		covered = true
		if vals, named := r.params[k]; named {
			if matchAny(vals, v) {
				return true
			}
			restricted = true
		}
	}
	return covered && !restricted
}
