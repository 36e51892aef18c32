package refs

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Entry is one variant of a resource in a Set, with its references.
type Entry struct {
	// Type is the type URL the resource is served as; Name its canonical
	// name.
	Type, Name  string
	Constraints constraint.Constraints
	Refs        []Ref
	// Loc is where the variant was authored; zero for one already stored.
	Loc resource.Location
	// Batch says the variant is one of those being checked, not one a
	// store holds.
	Batch bool
}

// Describe names the entry in reports: "route tp2", "cluster c [env=prod]".
func (e *Entry) Describe() string {
	s := Kind(e.Type) + " " + e.Name
	if !e.Constraints.IsZero() {
		s += " [" + e.Constraints.String() + "]"
	}
	return s
}

type group struct{ typ, name string }

// Set is the variants of the resources a client could be served, from
// which it resolves references. The zero Set is empty and ready. A Set
// may be kept and changed (Add, Remove), as the client checks keep one
// of what a store holds between applies.
type Set struct {
	groups map[group][]*Entry
	order  []*Entry // nil once an entry was removed (removed)
	// removed says an entry was removed: Entries then lists by resource.
	removed bool
	auths   map[string]int // authorities of the set's xdstp:// names → the variants in each
	stats   paramStats
	// referrers lists, for each resource named by a reference, the
	// variants that reference it: what a change to it may affect.
	referrers map[group]referrers
}

// referrers are the variants that reference a resource: a list while
// they are few, a set once they are many (every cluster of a mesh may
// name one secret), so that removing one is never a walk of a million.
type referrers struct {
	list []*Entry       // once per reference
	set  map[*Entry]int // entry → its references; nil while list serves
}

// maxReferrerList is how many references a list holds before a set
// replaces it.
const maxReferrerList = 64

func (r referrers) len() int { return len(r.list) + len(r.set) }

// each calls f with each variant, once per reference in a list, once in
// a set.
func (r referrers) each(f func(*Entry)) {
	for _, e := range r.list {
		f(e)
	}
	for e := range r.set {
		f(e)
	}
}

// any reports whether f holds for some variant, stopping at the first.
func (r referrers) any(f func(*Entry) bool) bool {
	for _, e := range r.list {
		if f(e) {
			return true
		}
	}
	for e := range r.set {
		if f(e) {
			return true
		}
	}
	return false
}

func (r referrers) add(e *Entry) referrers {
	if r.set == nil && len(r.list) < maxReferrerList {
		r.list = append(r.list, e)
		return r
	}
	if r.set == nil {
		r.set = make(map[*Entry]int, 2*len(r.list))
		for _, o := range r.list {
			r.set[o]++
		}
		r.list = nil
	}
	r.set[e]++
	return r
}

func (r referrers) remove(e *Entry) referrers {
	if r.set != nil {
		if r.set[e]--; r.set[e] <= 0 {
			delete(r.set, e)
		}
		return r
	}
	if j := slices.Index(r.list, e); j >= 0 {
		r.list[j] = r.list[len(r.list)-1]
		r.list = r.list[:len(r.list)-1]
	}
	return r
}

// paramStats counts the parameter keys and values the variants mention,
// so that removing a variant forgets only what no other mentions.
type paramStats struct {
	values map[string]map[string]int // parameter key → value → variants comparing the key with it
	keys   map[string]int            // parameter key → variants mentioning it
}

// count adds (d = 1) or removes (d = -1) what c mentions.
func (ps *paramStats) count(c constraint.Constraints, d int) {
	if c.IsZero() {
		return
	}
	if ps.values == nil {
		ps.values = map[string]map[string]int{}
		ps.keys = map[string]int{}
	}
	for k, vs := range c.Values() {
		ps.keys[k] += d
		if ps.values[k] == nil {
			ps.values[k] = map[string]int{}
		}
		for _, v := range vs {
			if ps.values[k][v] += d; ps.values[k][v] <= 0 {
				delete(ps.values[k], v)
			}
		}
		if ps.keys[k] <= 0 {
			delete(ps.keys, k)
			delete(ps.values, k)
		}
	}
}

// Add puts a variant in the set.
func (s *Set) Add(e *Entry) {
	if s.groups == nil {
		s.groups = map[group][]*Entry{}
		s.auths = map[string]int{}
		s.referrers = map[group]referrers{}
	}
	g := group{e.Type, e.Name}
	s.groups[g] = append(s.groups[g], e)
	if !s.removed {
		s.order = append(s.order, e)
	}
	if a, ok := authority(e.Name); ok {
		s.auths[a]++
	}
	s.stats.count(e.Constraints, 1)
	for _, r := range e.Refs {
		t := group{r.Type, r.Name}
		s.referrers[t] = s.referrers[t].add(e)
	}
}

// Remove takes a variant Add put in the set out of it; it does nothing
// for one the set does not hold.
func (s *Set) Remove(e *Entry) {
	g := group{e.Type, e.Name}
	es := s.groups[g]
	i := slices.Index(es, e)
	if i < 0 {
		return
	}
	if es = slices.Delete(es, i, i+1); len(es) == 0 {
		delete(s.groups, g)
	} else {
		s.groups[g] = es
	}
	s.order, s.removed = nil, true
	if a, ok := authority(e.Name); ok {
		if s.auths[a]--; s.auths[a] <= 0 {
			delete(s.auths, a)
		}
	}
	s.stats.count(e.Constraints, -1)
	for _, r := range e.Refs {
		t := group{r.Type, r.Name}
		if rs := s.referrers[t].remove(e); rs.len() == 0 {
			delete(s.referrers, t)
		} else {
			s.referrers[t] = rs
		}
	}
}

// Len is the number of variants in the set.
func (s *Set) Len() int {
	n := 0
	for _, es := range s.groups {
		n += len(es)
	}
	return n
}

// Has reports whether the set holds a variant of the resource.
func (s *Set) Has(typeURL, name string) bool { return len(s.groups[group{typeURL, name}]) > 0 }

// Variants returns the variants of a resource the set holds.
func (s *Set) Variants(typeURL, name string) []*Entry { return s.groups[group{typeURL, name}] }

// Entries returns every variant in the set, in the order added; once a
// variant was removed, by resource (type URL, then name) and in the order
// added within each.
func (s *Set) Entries() []*Entry {
	if !s.removed {
		return s.order
	}
	gs := make([]group, 0, len(s.groups))
	for g := range s.groups {
		gs = append(gs, g)
	}
	sortGroups(gs)
	var out []*Entry
	for _, g := range gs {
		out = append(out, s.groups[g]...)
	}
	return out
}

// sortGroups sorts resources by type URL, then name.
func sortGroups(gs []group) {
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].typ != gs[j].typ {
			return gs[i].typ < gs[j].typ
		}
		return gs[i].name < gs[j].name
	})
}

// Pick returns the variant of a resource that a client with parameters p
// gets: the one whose constraints match p (TP2 lets at most one match),
// or nil.
func (s *Set) Pick(typeURL, name string, p constraint.Params) *Entry {
	for _, e := range s.groups[group{typeURL, name}] {
		if e.Constraints.Match(p) {
			return e
		}
	}
	return nil
}

// Follows reports whether the set answers for a name: a legacy name
// always, an xdstp:// name when its authority is one of the set's. Names
// in other authorities are some other server's to resolve.
func (s *Set) Follows(n string) bool {
	a, ok := authority(n)
	return !ok || s.auths[a] > 0
}

// authority returns the authority of an xdstp:// name.
func authority(n string) (string, bool) {
	if !strings.HasPrefix(n, "xdstp:") {
		return "", false
	}
	u, err := name.ParseURN(n)
	if err != nil {
		return "", false
	}
	return u.Authority, true
}

// Keys lists the parameter keys the set's variants mention, sorted.
func (s *Set) Keys() []string {
	keys := make([]string, 0, len(s.stats.values))
	for k := range s.stats.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Node is one resource in the chain a client resolves (Resolve).
type Node struct {
	Type, Name string
	// Entry is the variant the client gets; nil when it gets none.
	Entry *Entry
	// Via is the reference followed to get here; nil at the root.
	Via *Ref
	// Kids are the resources it references, in order.
	Kids []*Node
	// Seen is true for a resource already shown higher up: its references
	// are not followed again.
	Seen bool
	// External is true for a name in an authority the set does not serve.
	External bool
}

// Resolve follows the references a client with parameters p resolves
// from a resource, depth first, each resource once.
func (s *Set) Resolve(typeURL, name string, p constraint.Params) *Node {
	seen := map[group]bool{}
	var walk func(typ, n string, via *Ref) *Node
	walk = func(typ, n string, via *Ref) *Node {
		nd := &Node{Type: typ, Name: n, Via: via}
		if !s.Follows(n) {
			nd.External = true
			return nd
		}
		g := group{typ, n}
		if seen[g] {
			nd.Seen = true
			nd.Entry = s.Pick(typ, n, p)
			return nd
		}
		seen[g] = true
		nd.Entry = s.Pick(typ, n, p)
		if nd.Entry == nil {
			return nd
		}
		for i := range nd.Entry.Refs {
			r := &nd.Entry.Refs[i]
			nd.Kids = append(nd.Kids, walk(r.Type, r.Name, r))
		}
		return nd
	}
	return walk(typeURL, name, nil)
}

// String draws the chain, one resource a line, indented by depth.
func (n *Node) String() string {
	var b strings.Builder
	var draw func(n *Node, depth int)
	draw = func(n *Node, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		if n.Via != nil {
			b.WriteString(n.Via.Path + " → ")
		}
		fmt.Fprintf(&b, "%s %s", Kind(n.Type), n.Name)
		switch {
		case n.External:
			b.WriteString(" (another authority)")
		case n.Entry == nil:
			b.WriteString(": none")
		case !n.Entry.Constraints.IsZero():
			b.WriteString(" [" + n.Entry.Constraints.String() + "]")
		}
		if n.Seen {
			b.WriteString(" (above)")
		}
		b.WriteByte('\n')
		for _, k := range n.Kids {
			draw(k, depth+1)
		}
	}
	draw(n, 0)
	return b.String()
}

// Kind is the short name of a resource type in reports: listener, route,
// cluster, endpoints, secret, ...
func Kind(typeURL string) string {
	switch typeURL {
	case resource.ListenerURL:
		return "listener"
	case resource.RouteURL:
		return "route"
	case resource.ScopedRouteURL:
		return "scoped route"
	case resource.VirtualHostURL:
		return "virtual host"
	case resource.ClusterURL:
		return "cluster"
	case resource.EndpointURL:
		return "endpoints"
	case resource.SecretURL:
		return "secret"
	case resource.ExtensionConfigURL:
		return "extension config"
	case resource.RuntimeURL:
		return "runtime"
	}
	return resource.ForURL(typeURL).Name
}
