package clientcheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/docprep"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/resource"
)

// RuleSet is the kind of xDS client a batch is checked for: the rule set
// of the NACKs it predicts (envoy, grpc), or auto: each group by its
// agent's.
type RuleSet string

// The clients whose behaviour is checked: Envoy and GRPC name the two
// rule sets; Auto checks for the clients of a fleet (NewFleet), each by
// its agent's rule set.
const (
	Envoy RuleSet = "envoy"
	GRPC  RuleSet = "grpc"
	Auto  RuleSet = "auto"
)

// ParseRuleSet reads a --client value (none is the caller's: no checks).
func ParseRuleSet(s string) (RuleSet, error) {
	switch c := RuleSet(s); c {
	case Envoy, GRPC, Auto:
		return c, nil
	}
	return "", fmt.Errorf("unknown client %q: want auto, envoy, grpc or none", s)
}

func (c RuleSet) String() string {
	switch c {
	case GRPC:
		return "gRPC"
	case Auto:
		return "the fleet's clients"
	}
	return "Envoy"
}

// Severity says whether a finding stops an apply.
type Severity int

const (
	// Error is what the client rejects (a NACK), or a reference it would
	// wait for in vain: the apply is refused unless forced.
	Error Severity = iota
	// Warning is what the client accepts but probably not as meant.
	Warning
)

// Finding is one thing a client would reject, in one resource.
type Finding struct {
	*resource.DocError // where: the document and field, when authored in this batch
	// Resource names the resource: "route tp2 [env=prod]".
	Resource string
	Rule     string // e.g. "envoy/router-last"
	Severity Severity
	// RuleSet is the rule set that found it; "" for what is no one
	// client's (a dangling reference).
	RuleSet RuleSet
	// Groups are the clients it concerns, when a fleet is known: those
	// that would NACK the variant, or wait for a reference.
	Groups []Group

	entry *refs.Entry // the variant it is about, for a rule's finding
}

func (f Finding) String() string {
	sev := ""
	if f.Severity == Warning {
		sev = "warning: "
	}
	if f.Source == "" {
		return fmt.Sprintf("%s: %s%s [%s]", f.Resource, sev, f.Msg, f.Rule)
	}
	return fmt.Sprintf("%s (%s): %s%s [%s]", f.Location(), f.Resource, sev, f.Msg, f.Rule)
}

// Location is the DocError's place without its message.
func (f Finding) Location() string {
	e := *f.DocError
	e.Msg = ""
	return strings.TrimSuffix(e.Error(), ": ")
}

// Checker collects what a client would reject in a batch of documents,
// checked on its own or on top of what a store holds. Add the batch's
// documents, then the stored variants (AddStored), then ask Findings.
type Checker struct {
	asked  RuleSet   // as asked: envoy, grpc or auto
	rules  []RuleSet // the rule sets run
	groups []Group   // the fleet, merged; nil when none is known
	set    refs.Set
	found  []Finding
	// refPos holds, for each entry of the batch that makes references,
	// where each of them is written.
	refPos   map[*refs.Entry][]refAt
	listens  []listening
	maxFound int
	dropped  int
	// base, when set (On), is what the store holds, kept between applies:
	// set then holds the batch alone, and the checks across resources
	// look only near it.
	base *Index
}

// MaxFindings bounds the findings a Checker keeps; past it they are
// counted.
const MaxFindings = 1000

// New returns a checker for a client, with no fleet known (NewFleet).
func New(c RuleSet) *Checker { return NewFleet(c, nil) }

// RuleSet is the rule set the checker was asked for: envoy, grpc or auto.
func (k *Checker) RuleSet() RuleSet { return k.asked }

func (k *Checker) add(f Finding) {
	if len(k.found) >= k.maxFound {
		k.dropped++
		return
	}
	k.found = append(k.found, f)
}

// Add checks a document of the batch and keeps what the checks across
// resources need of it.
func (k *Checker) Add(d *resource.Document) { k.AddPrepared(d, k.Prepare(d, nil)) }

// Prepared is what the checker works out of one document on its own
// (Prepare), before it adds it to what it knows of the others
// (AddPrepared).
type Prepared struct {
	e        *refs.Entry
	pos      []refAt
	findings []Finding
	listens  []listening
}

// Prepare works out what the checker needs of one document, alone: its
// references and where they are written, and the findings of the rules
// that look at one resource. anys are the document's Any values its
// validation decoded (nil: none; the rest are decoded here). It may be
// called for several documents at once.
func (k *Checker) Prepare(d *resource.Document, anys *docprep.Anys) *Prepared {
	v := d.Variant
	e := &refs.Entry{Type: v.Type.URL, Name: v.Name, Constraints: v.Constraints, Refs: refs.OfDecoding(d.Message, anys.Unpack), Loc: d.Location, Batch: true}
	p := &Prepared{e: e}
	if len(e.Refs) > 0 {
		p.pos = make([]refAt, len(e.Refs))
		for i, r := range e.Refs {
			at := d.ErrorAt(r.Path, "")
			p.pos[i] = refAt{path: at.Path, line: int32(at.Line), col: int32(at.Column)}
		}
	}
	desc := e.Describe()
	if d.Message != nil && !v.IsRedirect() {
		for _, rs := range k.rules {
			report := func(rule string, sev Severity, path, format string, args ...any) {
				p.findings = append(p.findings, Finding{DocError: d.ErrorAt(path, format, args...), Resource: desc, Rule: rule, Severity: sev, RuleSet: rs, entry: e})
			}
			rules := envoyRules
			if rs == GRPC {
				rules = grpcRules
			}
			for _, r := range rules {
				r(v.Type.URL, d.Message, report)
			}
			if rs == Envoy {
				envoyV2Types(d.Message, v.Body(), report)
			}
		}
	}
	if k.runs(Envoy) {
		p.listens = listenings(e, d.Message)
	}
	return p
}

// AddPrepared adds a document Prepare has prepared; documents are added
// one at a time, in the batch's order.
func (k *Checker) AddPrepared(d *resource.Document, p *Prepared) {
	k.set.Add(p.e)
	if p.pos != nil {
		k.refPos[p.e] = p.pos
	}
	for _, f := range p.findings {
		k.add(f)
	}
	k.listens = append(k.listens, p.listens...)
}

// refAt is where a reference of a batch entry is written: a
// resource.DocError's place, kept in a quarter of its size (a batch of
// 100,000 resources has about as many references).
type refAt struct {
	path      string
	line, col int32
}

// inBatch reports whether the batch gives the resource: the batch's
// entries of a resource come before any stored one (AddStored adds none
// of a resource the batch gives).
func (k *Checker) inBatch(typeURL, name string) bool {
	vs := k.set.Variants(typeURL, name)
	return len(vs) > 0 && vs[0].Batch
}

// Stored is what the checks across resources need of a variant a store
// holds: worth keeping between applies, as computing it decodes the
// variant.
type Stored struct {
	entry   *refs.Entry
	listens []listening
}

// Summarize computes what the checks need of a stored variant and its
// decoded payload.
func Summarize(v *resource.Variant, m proto.Message) *Stored {
	e := &refs.Entry{Type: v.Type.URL, Name: v.Name, Constraints: v.Constraints, Refs: refs.Of(m)}
	return &Stored{entry: e, listens: listenings(e, m)}
}

// AddStored adds a variant a store holds, which the batch leaves as it
// is: one of a resource the batch does not give (the batch replaces all
// the variants of those it gives). Its own problems are not reported
// (they are not this batch's), only what the batch does to it.
func (k *Checker) AddStored(s *Stored) {
	e := s.entry
	if k.inBatch(e.Type, e.Name) {
		return
	}
	k.set.Add(e)
	if k.runs(Envoy) {
		k.listens = append(k.listens, s.listens...)
	}
}

// Entry is the stored variant's entry in a reference index.
func (s *Stored) Entry() *refs.Entry { return s.entry }

// Set is what the checker knows of the resources: the batch's and the
// stored ones it leaves.
func (k *Checker) Set() *refs.Set { return &k.set }

// Findings runs the checks across resources and returns every finding,
// errors first, each group in the order found. With a fleet known
// (NewFleet), an error stands only for the clients it concerns: a rule's
// finding in a variant no client of that rule set gets, and a reference
// that dangles only for parameter sets no client has, are warnings.
// Without one, the rules' findings are errors (with Auto, Envoy's; gRPC's
// are warnings) and dangling references warnings. Endpoints a cluster names that do not exist at all are
// warnings either way: clients wait for them, and they often come from
// another pipeline.
func (k *Checker) Findings() []Finding {
	found := make([]Finding, 0, len(k.found))
	for _, f := range k.found {
		found = append(found, k.judge(f))
	}
	found = append(found, k.danglingFindings()...)
	if k.runs(Envoy) {
		listens := k.listens
		if k.base != nil {
			listens = append(slices.Clip(listens), k.base.listensAt(k)...)
		}
		found = append(found, k.listenerConflicts(listens)...)
	}
	if len(found) > k.maxFound {
		k.dropped += len(found) - k.maxFound
		found = found[:k.maxFound]
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].Severity < found[j].Severity })
	return found
}

// Dropped counts findings beyond MaxFindings.
func (k *Checker) Dropped() int { return k.dropped }

// judge turns a rule's error into a warning when a fleet is known and
// none of its clients of that rule set gets the variant; otherwise it
// names those that do.
func (k *Checker) judge(f Finding) Finding {
	if f.Severity != Error || f.entry == nil {
		return f
	}
	if k.groups == nil {
		if k.asked == Auto && f.RuleSet == GRPC {
			// Without a fleet, Envoy's rules refuse, as the default did
			// before auto; gRPC's are reported: a bare cluster is STATIC,
			// which every gRPC client NACKs and Envoy takes.
			d := *f.DocError
			f.DocError, f.Severity = &d, Warning
			d.Msg += " (no client is connected or declared: this refuses a batch once a gRPC client is, or with --client grpc)"
		}
		return f
	}
	var who []Group
	for _, g := range k.groups {
		if k.ruleOf(g) == f.RuleSet && f.entry.Constraints.Match(g.Params) {
			who = append(who, g)
		}
	}
	d := *f.DocError
	f.DocError = &d
	if len(who) == 0 {
		f.Severity = Warning
		d.Msg += fmt.Sprintf(" (no connected or declared %s client gets this variant)", f.RuleSet)
		return f
	}
	f.Groups = who
	d.Msg += " (" + describeGroups(who, f.entry.Constraints.Keys()) + " " + agree(who, "get") + " it)"
	return f
}

// resolver finds the references that resolve to nothing: in a Set of
// the batch and what the store holds, or near the batch (refs.Over).
type resolver interface {
	Dangling(wildcard ...string) []refs.Dangling
	DanglingAsked(params []constraint.Params, asks refs.Asks) []refs.Dangling
	Restrict(p constraint.Params) constraint.Params
}

// edge is a reference of one variant.
type edge struct {
	from *refs.Entry
	ref  refs.Ref
}

// danglingFindings reports the references that resolve to nothing: for
// every parameter set the variants tell apart, and, with a fleet known,
// for each of its groups' parameters, from what each rule set's clients
// ask for by themselves.
func (k *Checker) danglingFindings() []Finding {
	found := map[edge]refs.Dangling{}
	var order []edge
	note := func(d refs.Dangling) edge {
		e := edge{d.From, d.Ref}
		if _, ok := found[e]; !ok {
			found[e] = d
			order = append(order, e)
		}
		return e
	}
	var set resolver = &k.set
	if k.base != nil {
		set = refs.NewOver(&k.base.set, &k.set)
	}
	for _, d := range set.Dangling(k.wildcard()...) {
		note(d)
	}
	hits := map[edge][]Group{}
	if k.groups != nil {
		// Clients resolve alike when their rule set fetches alike and
		// their parameters agree on the keys the variants mention.
		type probe struct {
			whole bool
			key   string
		}
		var probes []probe
		params := map[probe]constraint.Params{}
		members := map[probe][]Group{}
		for _, g := range k.groups {
			p := set.Restrict(g.Params)
			pr := probe{k.ruleOf(g) != GRPC, p.Key()}
			if _, ok := params[pr]; !ok {
				probes = append(probes, pr)
				params[pr] = p
			}
			members[pr] = append(members[pr], g)
		}
		for _, pr := range probes {
			for _, d := range set.DanglingAsked([]constraint.Params{params[pr]}, asks(pr.whole)) {
				e := note(d)
				hits[e] = append(hits[e], members[pr]...)
			}
		}
	}
	var out []Finding
	for _, e := range order {
		d := found[e]
		if !k.inBatch(d.From.Type, d.From.Name) && !k.inBatch(d.Ref.Type, d.Ref.Name) {
			continue // not this batch's doing
		}
		out = append(out, k.dangling(d, hits[e]))
	}
	return out
}

// asks is what a group's clients ask for by themselves: for Envoy (and
// clients not known to be gRPC), every listener and cluster, and what
// nothing references; for gRPC, the listeners it is given.
func asks(whole bool) refs.Asks {
	if !whole {
		return refs.ListenersOnly
	}
	return func(typeURL string, referenced bool) bool {
		return typeURL == resource.ListenerURL || typeURL == resource.ClusterURL || !referenced
	}
}

// envoyWildcard are the types Envoy fetches whole: every listener and
// cluster (LDS and CDS wildcard, the Envoy docs' "xDS REST and gRPC
// protocol"); a gRPC client only what it names.
var envoyWildcard = []string{resource.ListenerURL, resource.ClusterURL}

// wildcard lists the types fetched whole by some client checked for: a
// gRPC-only check follows only what is named.
func (k *Checker) wildcard() []string {
	if k.groups == nil {
		if k.runs(Envoy) {
			return envoyWildcard
		}
		return nil
	}
	for _, g := range k.groups {
		if k.ruleOf(g) != GRPC {
			return envoyWildcard
		}
	}
	return nil
}

// dangling turns a reference that resolves to nothing into a finding.
// Envoy rejects a route configuration that names an unknown cluster when
// it validates its clusters (RouteConfiguration.validate_clusters: "route:
// unknown cluster"); otherwise a client waits for the resource (gRPC:
// gRFC A27, "does not exist" after a timeout; Envoy: the listener or
// cluster stays warming) and requests fail. who are the groups of the
// fleet whose parameters hit it.
func (k *Checker) dangling(d refs.Dangling, who []Group) Finding {
	var where *resource.DocError
	if pos := k.refPos[d.From]; pos != nil {
		for i, r := range d.From.Refs {
			if r == d.Ref && i < len(pos) {
				where = &resource.DocError{Source: d.From.Loc.Source, Index: d.From.Loc.Index, Line: int(pos[i].line), Column: int(pos[i].col), Path: pos[i].path}
				break
			}
		}
	}
	if where == nil {
		where = &resource.DocError{}
		if d.From.Loc.Source != "" {
			where = &resource.DocError{Source: d.From.Loc.Source, Index: d.From.Loc.Index, Line: d.From.Loc.Line, Column: d.From.Loc.Column, Path: d.Ref.Path}
		}
	}
	f := Finding{DocError: where, Resource: d.From.Describe(), Rule: "refs/dangling", Severity: Warning}
	var envoys []Group
	for _, g := range who {
		if k.ruleOf(g) == Envoy {
			envoys = append(envoys, g)
		}
	}
	target := refs.Kind(d.Ref.Type) + " " + d.Ref.Name
	switch {
	case d.Ref.Strict && k.runs(Envoy) && (k.groups == nil || len(envoys) > 0):
		// A NACK, not a wait.
		f.Rule, f.Severity, f.RuleSet = "envoy/validate-clusters", Error, Envoy
		where.Msg = d.String()
		if len(envoys) > 0 {
			f.Groups = envoys
			where.Msg = describeGroups(envoys, d.Keys) + " would reject " + d.From.Describe() + ": " + d.Edge()
		}
		where.Msg += fmt.Sprintf(" (Envoy rejects the route configuration: validate_clusters is on, \"route: unknown cluster '%s'\")", d.Ref.Name)
	case d.Ref.Type == resource.EndpointURL && d.NoSuch:
		f.Rule = "refs/endpoints-pending"
		where.Msg = d.String() + " yet: clients keep the cluster warming until they come (Envoy goes on without them after initial_fetch_timeout; gRPC fails RPCs to it), which is expected when endpoints are applied after their clusters or by another pipeline"
	case len(who) > 0:
		f.Severity, f.Groups = Error, who
		where.Msg = describeGroups(who, d.Keys) + " would wait for " + target + ": " + d.Edge()
		if k.asked != Auto {
			where.Msg += k.waits()
		}
	case k.groups != nil:
		where.Msg = d.String() + " (no connected or declared client has these parameters)"
	default:
		where.Msg = d.String() + k.waits() + "; no client is connected and none is declared (--fleet): a refusal only for parameter sets a client has"
	}
	return f
}

// waits says what a client of the checked kind does about a reference
// that resolves to nothing.
func (k *Checker) waits() string {
	switch k.asked {
	case GRPC:
		return " (a gRPC client is told it does not exist, and its RPCs fail)"
	case Envoy:
		return " (Envoy waits for it: requests that need it fail)"
	}
	return " (a client waits for it: Envoy keeps what needs it warming, gRPC is told it does not exist; requests that need it fail)"
}

// listening is an address a listener binds.
type listening struct {
	e    *refs.Entry
	addr string
}

// listenerConflicts finds two listeners one Envoy would get (for some
// parameter set) that bind the same address: Envoy refuses the second
// ("error adding listener: 'b' has duplicate address '0.0.0.0:80' as
// existing listener"; source/common/listener_manager/listener_manager_impl.cc).
func (k *Checker) listenerConflicts(listens []listening) []Finding {
	byAddr := map[string][]listening{}
	var addrs []string
	for _, l := range listens {
		if _, ok := byAddr[l.addr]; !ok {
			addrs = append(addrs, l.addr)
		}
		byAddr[l.addr] = append(byAddr[l.addr], l)
	}
	var out []Finding
	for _, a := range addrs {
		ls := byAddr[a]
		for i := range ls {
			for j := 0; j < i; j++ {
				x, y := ls[j].e, ls[i].e
				if x.Name == y.Name {
					continue // variants of one listener: a client gets one
				}
				if !k.inBatch(x.Type, x.Name) && !k.inBatch(y.Type, y.Name) {
					continue
				}
				w, ok, err := constraint.Overlap(x.Constraints, y.Constraints)
				if err != nil || !ok {
					continue
				}
				where := &resource.DocError{Source: y.Loc.Source, Index: y.Loc.Index, Line: y.Loc.Line, Column: y.Loc.Column, Path: "address"}
				if y.Loc.Source == "" {
					where = &resource.DocError{Source: x.Loc.Source, Index: x.Loc.Index, Line: x.Loc.Line, Column: x.Loc.Column, Path: "address"}
				}
				params := ""
				if len(w) > 0 {
					params = " for clients with " + w.String()
				}
				where.Msg = fmt.Sprintf("listeners %s and %s both bind %s%s: Envoy refuses the second (\"has duplicate address\")", x.Name, y.Name, a, params)
				f := Finding{DocError: where, Resource: y.Describe(), Rule: "envoy/listener-address", RuleSet: Envoy}
				if k.groups != nil {
					for _, g := range k.groups {
						if k.ruleOf(g) == Envoy && x.Constraints.Match(g.Params) && y.Constraints.Match(g.Params) {
							f.Groups = append(f.Groups, g)
						}
					}
					if len(f.Groups) == 0 {
						f.Severity = Warning
						where.Msg += " (no connected or declared envoy client gets both)"
					} else {
						where.Msg += " (" + describeGroups(f.Groups, append(x.Constraints.Keys(), y.Constraints.Keys()...)) + " " + agree(f.Groups, "get") + " both)"
					}
				}
				out = append(out, f)
			}
		}
	}
	return out
}
