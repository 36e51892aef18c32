package db

import (
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Sub is one subscription, the one description of it that the db, the
// downstream engine (protocol) and the upstream client share: a type, a
// canonical name, the dynamic parameters that select variants, what the
// name stands for, and whether it was made by TP2 resource locator. Make
// it with NewSub, which puts the name in canonical form and tells its
// kind, so no two layers derive them differently.
type Sub struct {
	Key
	// Params are the dynamic parameters: a locator's (TP2), the node
	// metadata's for a plain subscription (docs/architecture.md §4.5), a
	// bootstrap's (client). nil when there are none.
	Params constraint.Params
	// Kind is what Name stands for.
	Kind Kind
}

// Key identifies a subscription; it is the map key for subscriptions
// everywhere. Name alone, with ParamsKey empty, also names a resource
// (its status in a client, a removal in an Update).
type Key struct {
	Type string // type URL
	Name string // canonical: a resource name, Wildcard, a glob URL, or a VHDS "<route config>/<host>"
	// ParamsKey is Params.Key(), the canonical form of the parameters
	// (AnyParams in an Update's Known: every parameter set).
	ParamsKey string
	// Locator: made by TP2 resource locator, so variants go with their
	// constraints. The same name and parameters asked for both ways are two
	// subscriptions of a stream, one of the db (which keys interest
	// without it).
	Locator bool
}

// Kind is what a subscription's name stands for.
type Kind uint8

// The kinds of subscription.
const (
	// Named is one resource.
	Named Kind = iota
	// AllOfType is Wildcard: every resource of the type.
	AllOfType
	// Glob is a TP1 glob collection ("…/*"): its immediate children with
	// the same context parameters.
	Glob
	// VHDS is an on-demand VHDS name "<route config>/<host>", resolved by
	// domain among the virtual hosts under the route configuration.
	VHDS
)

func (k Kind) String() string {
	switch k {
	case AllOfType:
		return "wildcard"
	case Glob:
		return "glob"
	case VHDS:
		return "vhds"
	}
	return "name"
}

// NewSub makes the subscription of typeURL's n under params, with n in
// canonical form (Canonical) and its kind told.
func NewSub(typeURL, n string, params constraint.Params) Sub {
	n, kind := canonical(typeURL, n)
	return Sub{Key: Key{Type: typeURL, Name: n, ParamsKey: params.Key()}, Params: params, Kind: kind}
}

// Canonical normalizes a subscribed or resource name (TP1
// "Normalization": parameter order and escaping never cause a miss;
// directives are dropped). A name that does not parse is kept as given: it
// matches nothing, and its subscriber is told so the usual way.
func Canonical(n string) string {
	n, _ = canonical("", n)
	return n
}

func canonical(typeURL, n string) (string, Kind) {
	kind := Named
	if n == Wildcard {
		return n, AllOfType
	}
	if u, err := name.Parse(n); err == nil {
		n = u.URN().String()
		if u.Glob {
			kind = Glob
		}
	}
	if kind == Named && typeURL == resource.VirtualHostURL && strings.Contains(n, "/") {
		kind = VHDS
	}
	return n, kind
}

// IsCollection reports whether the subscription is to many resources: the
// wildcard or a glob.
func (s Sub) IsCollection() bool { return s.Kind == AllOfType || s.Kind == Glob }

// Covers reports whether the subscription, whatever its parameters, takes
// in the resource named n: by name, as the wildcard, or as the glob n is an
// immediate child of.
func (s Sub) Covers(n string) bool {
	switch s.Kind {
	case AllOfType:
		return true
	case Glob:
		g, ok := InGlob(n)
		return ok && g == s.Name
	}
	return s.Name == n
}

// interest is the key the db counts subscriptions under: a locator and a
// plain subscription with the same parameters are one interest, served by
// one upstream subscription.
func (k Key) interest() Key {
	k.Locator = false
	return k
}

// IsGlob reports whether a subscription name is a glob collection URL
// (TP1: an xdstp:// URL whose path ends in an unescaped "/*"), by its parsed
// form: a parameter value that happens to hold "/*" does not make a glob.
func IsGlob(n string) bool {
	if !strings.HasPrefix(n, "xdstp:") {
		return false
	}
	u, err := name.Parse(n)
	return err == nil && u.Glob
}

// InGlob reports the glob collection URL a resource name belongs to, if any.
func InGlob(n string) (string, bool) {
	u, err := name.ParseURN(n)
	if err != nil {
		return "", false
	}
	g, ok := u.GlobCollection()
	if !ok {
		return "", false
	}
	return g.String(), true
}
