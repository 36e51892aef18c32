package name

import (
	"errors"
	"fmt"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
)

// Locator gives the proto form TP1 defines as the canonical encoding of a
// URL, for messages (collection entries, redirects) that carry one. A glob
// has no field of its own in the proto, so it is written into Id as a
// trailing "/*" ("*" for the glob with no parent), exactly as it appears
// in the URL. The proto's Id is not escaped, so an id that ends in a "*"
// segment without being a glob (written "%2A" in a URL) reads back as a
// glob: the proto cannot tell them apart. Legacy names have no locator:
// the result is nil.
func (n Name) Locator() *xdscorev3.ResourceLocator {
	if !n.IsXDSTP() {
		return nil
	}
	l := &xdscorev3.ResourceLocator{
		Scheme:       xdscorev3.ResourceLocator_XDSTP,
		Id:           n.protoID(),
		Authority:    n.Authority,
		ResourceType: n.Type,
	}
	if m := paramMap(n.Params); m != nil {
		l.ContextParamSpecifier = &xdscorev3.ResourceLocator_ExactContext{
			ExactContext: &xdscorev3.ContextParams{Params: m},
		}
	}
	if n.Alt != nil {
		l.Directives = append(l.Directives, &xdscorev3.ResourceLocator_Directive{
			Directive: &xdscorev3.ResourceLocator_Directive_Alt{Alt: n.Alt.Locator()},
		})
	}
	if n.Entry != "" {
		l.Directives = append(l.Directives, &xdscorev3.ResourceLocator_Directive{
			Directive: &xdscorev3.ResourceLocator_Directive_Entry{Entry: n.Entry},
		})
	}
	return l
}

// FromLocator is the inverse of Locator. Only the XDSTP scheme is
// supported: http and file locators name no xDS resource this project
// serves, so they are an error rather than a silently wrong Name.
func FromLocator(l *xdscorev3.ResourceLocator) (Name, error) {
	return fromLocator(l, 0)
}

func fromLocator(l *xdscorev3.ResourceLocator, depth int) (Name, error) {
	if l == nil {
		return Name{}, errors.New("name: nil ResourceLocator")
	}
	if l.GetScheme() != xdscorev3.ResourceLocator_XDSTP {
		return Name{}, fmt.Errorf("name: ResourceLocator scheme %v not supported, only XDSTP", l.GetScheme())
	}
	n, err := fromFields(l.GetAuthority(), l.GetResourceType(), l.GetId(), l.GetExactContext().GetParams())
	if err != nil {
		return Name{}, err
	}
	for _, d := range l.GetDirectives() {
		switch d := d.GetDirective().(type) {
		case *xdscorev3.ResourceLocator_Directive_Alt:
			if n.Alt != nil {
				return Name{}, errors.New(`name: directive "alt" repeated`)
			}
			if depth+1 > maxAltDepth {
				return Name{}, fmt.Errorf("name: alt nested more than %d deep", maxAltDepth)
			}
			alt, err := fromLocator(d.Alt, depth+1)
			if err != nil {
				return Name{}, fmt.Errorf("name: in alt: %w", err)
			}
			n.Alt = &alt
		case *xdscorev3.ResourceLocator_Directive_Entry:
			if n.Entry != "" {
				return Name{}, errors.New(`name: directive "entry" repeated`)
			}
			if d.Entry == "" {
				return Name{}, errors.New("name: empty entry")
			}
			n.Entry = d.Entry
		default:
			return Name{}, errors.New("name: directive not set")
		}
	}
	return n, nil
}

// ResourceName gives the URN proto form. The proto has no glob or
// directive fields; directives are dropped (as URN does) and a glob is
// kept in Id as a trailing "/*", as Envoy's decodeUrn would leave it, so
// ResourceName and FromResourceName round-trip. Legacy names give nil.
func (n Name) ResourceName() *xdscorev3.ResourceName {
	if !n.IsXDSTP() {
		return nil
	}
	r := &xdscorev3.ResourceName{
		Id:           n.protoID(),
		Authority:    n.Authority,
		ResourceType: n.Type,
	}
	if m := paramMap(n.Params); m != nil {
		r.Context = &xdscorev3.ContextParams{Params: m}
	}
	return r
}

// FromResourceName is the inverse of ResourceName. It accepts a glob Id so
// that every Name's ResourceName converts back; callers wanting a strict
// URN check Glob.
func FromResourceName(r *xdscorev3.ResourceName) (Name, error) {
	if r == nil {
		return Name{}, errors.New("name: nil ResourceName")
	}
	return fromFields(r.GetAuthority(), r.GetResourceType(), r.GetId(), r.GetContext().GetParams())
}

func (n Name) protoID() string {
	switch {
	case !n.Glob:
		return n.ID
	case n.globUnderEmpty():
		return "/*"
	case n.ID == "":
		return "*"
	default:
		return n.ID + "/*"
	}
}

func fromFields(authority, typ, id string, params map[string]string) (Name, error) {
	if !validType(typ) {
		return Name{}, fmt.Errorf("name: invalid resource type %q", typ)
	}
	// The proto's Id is unescaped text in which a trailing "*" segment
	// marks a glob (resource_locator.proto), read as parse reads a URL.
	n := Name{Authority: authority, Type: typ, ID: id}
	if id == "*" {
		n.ID, n.Glob = "", true
	} else if strings.HasSuffix(id, "/*") {
		n.ID, n.Glob = id[:len(id)-2], true
		n.emptyParent = n.ID == ""
	}
	if len(params) > 0 {
		n.Params = make([]Param, 0, len(params))
		for k, v := range params {
			n.Params = append(n.Params, Param{k, v})
		}
		sortParams(n.Params)
	}
	return n, nil
}

func paramMap(ps []Param) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	m := make(map[string]string, len(ps))
	for _, p := range ps {
		if _, dup := m[p.Key]; !dup { // first wins, as in Parse
			m[p.Key] = p.Value
		}
	}
	return m
}
