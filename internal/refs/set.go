package refs

import (
	"fmt"
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
// which it resolves references. The zero Set is empty and ready.
type Set struct {
	groups map[group][]*Entry
	order  []*Entry
	auths  map[string]bool            // authorities of the set's xdstp:// names
	values map[string]map[string]bool // parameter key → values the variants mention
}

// Add puts a variant in the set.
func (s *Set) Add(e *Entry) {
	if s.groups == nil {
		s.groups = map[group][]*Entry{}
		s.auths = map[string]bool{}
		s.values = map[string]map[string]bool{}
	}
	g := group{e.Type, e.Name}
	s.groups[g] = append(s.groups[g], e)
	s.order = append(s.order, e)
	if a, ok := authority(e.Name); ok {
		s.auths[a] = true
	}
	for k, vs := range e.Constraints.Values() {
		if s.values[k] == nil {
			s.values[k] = map[string]bool{}
		}
		for _, v := range vs {
			s.values[k][v] = true
		}
	}
}

// Has reports whether the set holds a variant of the resource.
func (s *Set) Has(typeURL, name string) bool { return len(s.groups[group{typeURL, name}]) > 0 }

// Variants returns the variants of a resource the set holds.
func (s *Set) Variants(typeURL, name string) []*Entry { return s.groups[group{typeURL, name}] }

// Entries returns every variant in the set, in the order added.
func (s *Set) Entries() []*Entry { return s.order }

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
	return !ok || s.auths[a]
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
	keys := make([]string, 0, len(s.values))
	for k := range s.values {
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
