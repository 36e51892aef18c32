package refs

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// Dangling is a reference that does not resolve for some clients.
type Dangling struct {
	From *Entry
	Ref  Ref
	// Params are the parameter sets, over Keys (a key left out is unset),
	// whose clients get From but no variant of the target.
	Params []constraint.Params
	// Keys are the parameter keys that matter to the reference: those of
	// From's and the target's variants.
	Keys []string
	// More counts parameter sets beyond those listed.
	More int
	// NoSuch is true when the set holds no variant of the target at all.
	NoSuch bool
	// TP2 is true when the set's variants mention parameters at all, so
	// that reports say which parameter sets are hit.
	TP2 bool
}

// maxParamSets bounds the parameter sets enumerated for one reference, and
// maxListed those a Dangling lists.
const (
	maxParamSets = 4096
	maxListed    = 8
)

// String reads "env=prod, version=v2: route tp2 → cluster c-v2: no such
// cluster".
func (d Dangling) String() string {
	var b strings.Builder
	if d.TP2 {
		ps := make([]string, len(d.Params))
		for i, p := range d.Params {
			ps[i] = describeParams(p, d.Keys)
		}
		b.WriteString(strings.Join(ps, "; "))
		if d.More > 0 {
			fmt.Fprintf(&b, "; and %d more parameter sets", d.More)
		}
		b.WriteString(": ")
	}
	b.WriteString(d.Edge())
	return b.String()
}

// Edge reads "route tp2 → cluster c-v2: no such cluster": the reference
// and why it resolves to nothing, without the parameter sets.
func (d Dangling) Edge() string {
	s := fmt.Sprintf("%s %s → %s %s: ", Kind(d.From.Type), d.From.Name, Kind(d.Ref.Type), d.Ref.Name)
	if d.NoSuch {
		return s + "no such " + Kind(d.Ref.Type)
	}
	return s + "no variant for these parameters"
}

// describeParams reads "env=prod, no version": every key that matters,
// unset ones too; "all parameter sets" when none does.
func describeParams(p constraint.Params, keys []string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := p[k]; ok && v == anyValue {
			parts = append(parts, k+" set")
		} else if ok {
			parts = append(parts, constraint.Params{k: v}.Key())
		} else {
			parts = append(parts, "no "+k)
		}
	}
	if len(parts) == 0 {
		return "all parameter sets"
	}
	return strings.Join(parts, ", ")
}

// maxVisits bounds the work of Dangling: parameter sets times the
// resources each reaches.
const maxVisits = 20_000_000

// Dangling finds every reference that does not resolve, and for whom: for
// every parameter set the variants tell apart (ParamSets), it follows the
// references a client with those parameters resolves, from every resource
// such a client may ask for by itself (one of a type in wildcard, which a
// client fetches whole, as Envoy does listeners and clusters, or one
// nothing in the set references), and reports each reference that leads
// to no variant. A reference is reported once, with every parameter set
// (over the keys that matter to it) that hits it.
func (s *Set) Dangling(wildcard ...string) []Dangling {
	return s.dangling(s.ParamSets(), wildcard)
}

// DanglingFor is Dangling for the clients of the given parameter sets
// only (each restricted to the keys the set's variants mention; a key
// they do not mention changes nothing a client gets): those of the
// clients connected or declared, rather than every set the variants tell
// apart. A parameter set may give a key a value no variant mentions.
func (s *Set) DanglingFor(params []constraint.Params, wildcard ...string) []Dangling {
	return s.dangling(params, wildcard)
}

// roots lists the resources a client asks for by itself: those of a type
// in wildcard, which it fetches whole, and those nothing in the set
// references; in a stable order.
func (s *Set) roots(wildcard []string) []group {
	isWild := map[string]bool{}
	for _, t := range wildcard {
		isWild[t] = true
	}
	return s.rootsWhere(func(typeURL string, referenced bool) bool { return isWild[typeURL] || !referenced })
}

// Asks says which resources a client asks for by itself, by type and by
// whether anything in the set references them.
type Asks func(typeURL string, referenced bool) bool

// ListenersOnly is what a proxyless gRPC client asks for by itself: the
// listeners it is given by name (its target's, or a server's by
// template); routes, clusters and endpoints only as they are referenced.
func ListenersOnly(typeURL string, _ bool) bool { return typeURL == resource.ListenerURL }

// DanglingAsked is DanglingFor with the resources clients ask for by
// themselves given by asks.
func (s *Set) DanglingAsked(params []constraint.Params, asks Asks) []Dangling {
	return s.danglingFrom(params, s.rootsWhere(asks))
}

// ReachAsked is Reach with the resources the client asks for by itself
// given by asks.
func (s *Set) ReachAsked(p constraint.Params, asks Asks) []*Entry {
	return s.reach(p, s.rootsWhere(asks))
}

func (s *Set) rootsWhere(asks Asks) []group {
	var roots []group
	for g := range s.groups {
		if asks(g.typ, s.referrers[g].len() > 0) {
			roots = append(roots, g)
		}
	}
	sortGroups(roots)
	return roots
}

// Reach lists the variants a client with parameters p gets: those it
// resolves from every resource it asks for by itself (see Dangling), in
// the order met.
func (s *Set) Reach(p constraint.Params, wildcard ...string) []*Entry {
	return s.reach(p, s.roots(wildcard))
}

func (s *Set) reach(p constraint.Params, roots []group) []*Entry {
	var out []*Entry
	reached := map[*Entry]bool{}
	var visit func(e *Entry)
	visit = func(e *Entry) {
		if reached[e] || len(out) > maxVisits {
			return
		}
		reached[e] = true
		out = append(out, e)
		for _, r := range e.Refs {
			if !s.Follows(r.Name) {
				continue
			}
			if t := s.Pick(r.Type, r.Name, p); t != nil {
				visit(t)
			}
		}
	}
	for _, g := range roots {
		if e := s.Pick(g.typ, g.name, p); e != nil {
			visit(e)
		}
	}
	return out
}

func (s *Set) dangling(params []constraint.Params, wildcard []string) []Dangling {
	return s.danglingFrom(params, s.roots(wildcard))
}

func (s *Set) danglingFrom(params []constraint.Params, roots []group) []Dangling {
	return danglingIn(s, len(s.stats.values) > 0, params, roots, nil)
}

// graph is what following references reads of the variants: a Set's, or
// a batch's over a store's (Over).
type graph interface {
	variants(typeURL, name string) []*Entry
	Follows(name string) bool
}

func (s *Set) variants(typeURL, name string) []*Entry { return s.groups[group{typeURL, name}] }

// pick is Set.Pick in any graph.
func pick(gr graph, typeURL, name string, p constraint.Params) *Entry {
	for _, e := range gr.variants(typeURL, name) {
		if e.Constraints.Match(p) {
			return e
		}
	}
	return nil
}

// danglingIn finds the references that do not resolve in gr, following
// them from roots for each parameter set. With within, it follows only
// references to the resources within holds: those whose variants may
// reach the references the caller asks about (see Over), which it meets
// in the order a walk of the whole graph would.
func danglingIn(gr graph, tp2 bool, params []constraint.Params, roots []group, within map[group]bool) []Dangling {
	type edge struct {
		from *Entry
		ref  int
	}
	found := map[edge]*Dangling{}
	var order []edge
	seen := map[string]bool{} // per edge: parameter sets already listed
	visits := 0
	for _, p := range params {
		reached := map[*Entry]bool{}
		var visit func(e *Entry)
		visit = func(e *Entry) {
			if reached[e] || visits > maxVisits {
				return
			}
			reached[e] = true
			visits++
			for i, r := range e.Refs {
				if !gr.Follows(r.Name) {
					continue
				}
				if t := pick(gr, r.Type, r.Name, p); t != nil {
					if within == nil || within[group{r.Type, r.Name}] {
						visit(t)
					}
					continue
				}
				k := edge{e, i}
				d := found[k]
				if d == nil {
					d = &Dangling{From: e, Ref: r, NoSuch: len(gr.variants(r.Type, r.Name)) == 0, TP2: tp2, Keys: keysOf(gr, e, r)}
					found[k] = d
					order = append(order, k)
				}
				q := restrict(p, d.Keys)
				id := fmt.Sprintf("%p/%d/%s", e, i, q.Key())
				if seen[id] {
					continue
				}
				seen[id] = true
				if len(d.Params) < maxListed {
					d.Params = append(d.Params, q)
				} else {
					d.More++
				}
			}
		}
		for _, g := range roots {
			if e := pick(gr, g.typ, g.name, p); e != nil {
				visit(e)
			}
		}
	}
	out := make([]Dangling, len(order))
	for i, k := range order {
		out[i] = *found[k]
	}
	return out
}

// keysOf lists the keys that matter to a reference: those of the
// referring variant and of the target's variants.
func keysOf(gr graph, e *Entry, r Ref) []string {
	keys := e.Constraints.Keys()
	for _, t := range gr.variants(r.Type, r.Name) {
		keys = append(keys, t.Constraints.Keys()...)
	}
	sort.Strings(keys)
	return slices.Compact(keys)
}

// restrict keeps the keys of p among keys.
func restrict(p constraint.Params, keys []string) constraint.Params {
	q := constraint.Params{}
	for _, k := range keys {
		if v, ok := p[k]; ok {
			q[k] = v
		}
	}
	return q
}

// anyValue stands for a key that is set, to a value no constraint
// compares it with (a key only tested with exists()).
const anyValue = "\x00any"

// combinations calls f with each parameter set over keys: each key unset
// or set to a value the set mentions for it (or, for a key only tested
// with exists(), some value). It stops at maxParamSets.
func (s *Set) combinations(keys map[string]bool, f func(constraint.Params)) {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	choices := make([][]string, len(ks))
	for i, k := range ks {
		for v := range s.stats.values[k] {
			choices[i] = append(choices[i], v)
		}
		sort.Strings(choices[i])
		if len(choices[i]) == 0 {
			choices[i] = []string{anyValue}
		}
	}
	n := 0
	p := constraint.Params{}
	var rec func(i int)
	rec = func(i int) {
		if n >= maxParamSets {
			return
		}
		if i == len(ks) {
			n++
			q := make(constraint.Params, len(p))
			for k, v := range p {
				q[k] = v
			}
			f(q)
			return
		}
		rec(i + 1) // unset
		for _, v := range choices[i] {
			p[ks[i]] = v
			rec(i + 1)
			delete(p, ks[i])
		}
	}
	rec(0)
}

// ParamSets lists every combination of the values the set's variants
// mention (each key unset too), the empty set first: the parameter sets
// the set's variants tell apart. It stops at maxParamSets.
func (s *Set) ParamSets() []constraint.Params {
	keys := map[string]bool{}
	for k := range s.stats.values {
		keys[k] = true
	}
	var out []constraint.Params
	s.combinations(keys, func(p constraint.Params) { out = append(out, p) })
	return out
}

// Uncovered lists the parameter sets (over the keys of the resource's
// variants) for which a resource has no variant: a client sending them is
// told it does not exist. Nil when the set holds no variant of it.
func (s *Set) Uncovered(typeURL, name string) []constraint.Params {
	vs := s.Variants(typeURL, name)
	if len(vs) == 0 {
		return nil
	}
	keys := map[string]bool{}
	for _, v := range vs {
		for _, k := range v.Constraints.Keys() {
			keys[k] = true
		}
	}
	var out []constraint.Params
	s.combinations(keys, func(p constraint.Params) {
		for _, v := range vs {
			if v.Constraints.Match(p) {
				return
			}
		}
		out = append(out, p)
	})
	return out
}

// Restrict keeps the keys of p that the set's variants mention: the
// others change nothing a client gets, so clients that differ only in
// them are resolved alike.
func (s *Set) Restrict(p constraint.Params) constraint.Params {
	q := constraint.Params{}
	for k, v := range p {
		if _, ok := s.stats.values[k]; ok {
			q[k] = v
		}
	}
	return q
}
