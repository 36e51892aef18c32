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
package policy

import (
	"fmt"
	"os"
	"slices"
	"sort"

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
		var r rule
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
			default:
				err = perr(k, fp, "unknown field (want clients, types, names, params or admin)")
			}
			if err != nil {
				return nil, err
			}
		}
		if err := r.checkAdmin(rn, path, perr); err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
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
	if r.types != nil || r.names != nil || r.params != nil {
		return perr(n, path, "an admin rule grants the admin API only: give types, names and params in a rule of their own")
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
	return r.types == nil || slices.Contains(r.types, typeURL)
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
}

func (e *ClaimError) Error() string {
	who := e.Identity
	if who == "" {
		who = "a client without a certificate identity"
	}
	return fmt.Sprintf("dynamic parameter %s=%q: %s may not claim it (policy)", e.Param, e.Value, who)
}

// Claim checks the parameters a client claims (its node metadata's, or a
// TP2 locator's): nil, or a *ClaimError naming the first parameter, in
// name order, it may not claim.
func (p *Policy) Claim(identity string, params map[string]string) error {
	if len(params) == 0 {
		return nil
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !p.mayClaim(identity, k, params[k]) {
			return &ClaimError{Identity: identity, Param: k, Value: params[k]}
		}
	}
	return nil
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
