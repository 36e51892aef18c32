package clientcheck

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/resource"
)

// Client is the kind of xDS client the resources are for.
type Client string

// The clients whose behaviour is checked.
const (
	Envoy Client = "envoy"
	GRPC  Client = "grpc"
)

// ParseClient reads a --client value.
func ParseClient(s string) (Client, error) {
	switch c := Client(s); c {
	case Envoy, GRPC:
		return c, nil
	}
	return "", fmt.Errorf("unknown client %q: want envoy or grpc", s)
}

func (c Client) String() string {
	if c == GRPC {
		return "gRPC"
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
	client Client
	set    refs.Set
	found  []Finding
	// refPos holds, for each entry of the batch that makes references,
	// where each of them is written.
	refPos   map[*refs.Entry][]refAt
	listens  []listening
	maxFound int
	dropped  int
}

// MaxFindings bounds the findings a Checker keeps; past it they are
// counted.
const MaxFindings = 1000

// New returns a checker for a client.
func New(c Client) *Checker {
	return &Checker{client: c, refPos: map[*refs.Entry][]refAt{}, maxFound: MaxFindings}
}

// Client is the client the checker checks for.
func (k *Checker) Client() Client { return k.client }

func (k *Checker) add(f Finding) {
	if len(k.found) >= k.maxFound {
		k.dropped++
		return
	}
	k.found = append(k.found, f)
}

// Add checks a document of the batch and keeps what the checks across
// resources need of it.
func (k *Checker) Add(d *resource.Document) { k.AddPrepared(d, k.Prepare(d)) }

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
// that look at one resource. It may be called for several documents at
// once.
func (k *Checker) Prepare(d *resource.Document) *Prepared {
	v := d.Variant
	e := &refs.Entry{Type: v.Type.URL, Name: v.Name, Constraints: v.Constraints, Refs: refs.OfDecoding(d.Message, d.AnyMessage), Loc: d.Location, Batch: true}
	p := &Prepared{e: e}
	if len(e.Refs) > 0 {
		p.pos = make([]refAt, len(e.Refs))
		for i, r := range e.Refs {
			at := d.ErrorAt(r.Path, "")
			p.pos[i] = refAt{path: at.Path, line: int32(at.Line), col: int32(at.Column)}
		}
	}
	desc := e.Describe()
	report := func(rule string, sev Severity, path, format string, args ...any) {
		p.findings = append(p.findings, Finding{DocError: d.ErrorAt(path, format, args...), Resource: desc, Rule: rule, Severity: sev})
	}
	rules := envoyRules
	if k.client == GRPC {
		rules = grpcRules
	}
	if d.Message != nil && !v.IsRedirect() {
		for _, r := range rules {
			r(v.Type.URL, d.Message, report)
		}
		if k.client == Envoy {
			envoyV2Types(d.Message, v.Body(), report)
		}
	}
	if k.client == Envoy {
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
	if k.client == Envoy {
		k.listens = append(k.listens, s.listens...)
	}
}

// Set is what the checker knows of the resources: the batch's and the
// stored ones it leaves.
func (k *Checker) Set() *refs.Set { return &k.set }

// Findings runs the checks across resources and returns every finding,
// errors first, each group in the order found.
func (k *Checker) Findings() []Finding {
	found := append([]Finding(nil), k.found...)
	for _, d := range k.set.Dangling(k.wildcard()...) {
		if !k.inBatch(d.From.Type, d.From.Name) && !k.inBatch(d.Ref.Type, d.Ref.Name) {
			continue // not this batch's doing
		}
		found = append(found, k.dangling(d))
	}
	if k.client == Envoy {
		found = append(found, k.listenerConflicts()...)
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

// wildcard lists the types the client fetches whole: Envoy subscribes to
// every listener and cluster (LDS and CDS wildcard, the Envoy docs' "xDS
// REST and gRPC protocol"); a gRPC client only to what it names.
func (k *Checker) wildcard() []string {
	if k.client == Envoy {
		return []string{resource.ListenerURL, resource.ClusterURL}
	}
	return nil
}

// dangling turns a reference that resolves to nothing into a finding.
// Envoy rejects a route configuration that names an unknown cluster when
// it validates its clusters (RouteConfiguration.validate_clusters: "route:
// unknown cluster"); otherwise a client waits for the resource (gRPC:
// gRFC A27, "does not exist" after a timeout; Envoy: the listener or
// cluster stays warming) and requests fail.
func (k *Checker) dangling(d refs.Dangling) Finding {
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
	rule, msg := "refs/dangling", d.String()
	switch {
	case d.Ref.Strict && k.client == Envoy:
		rule = "envoy/validate-clusters"
		msg += fmt.Sprintf(" (Envoy rejects the route configuration: validate_clusters is on, \"route: unknown cluster '%s'\")", d.Ref.Name)
	case k.client == GRPC:
		msg += " (a gRPC client is told it does not exist, and its RPCs fail)"
	default:
		msg += " (Envoy waits for it: requests that need it fail)"
	}
	where.Msg = msg
	return Finding{DocError: where, Resource: d.From.Describe(), Rule: rule}
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
func (k *Checker) listenerConflicts() []Finding {
	byAddr := map[string][]listening{}
	var addrs []string
	for _, l := range k.listens {
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
				out = append(out, Finding{DocError: where, Resource: y.Describe(), Rule: "envoy/listener-address"})
			}
		}
	}
	return out
}
