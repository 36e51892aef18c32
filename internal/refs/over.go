package refs

import (
	"maps"

	"github.com/xdsd/xdsd/constraint"
)

// Over is a batch's variants over those a store holds, as a client would
// be served them once the batch is applied: a resource the batch gives
// has the batch's variants only (a batch replaces every variant of a
// resource it gives), the others the store's. Its dangling references are
// found near the batch: from the variants that may reach one of the
// batch's resources or a reference to one, so that checking a batch costs
// in proportion to the batch and what it touches, not to the store. Base
// must not change while an Over of it is in use.
type Over struct {
	base, top *Set
	// merged counts the parameter keys and values, and the authorities,
	// of the two together (it holds no variants).
	merged Set
}

// NewOver returns top's variants over base's.
func NewOver(base, top *Set) *Over {
	o := &Over{base: base, top: top}
	o.merged.auths = maps.Clone(base.auths)
	if o.merged.auths == nil {
		o.merged.auths = map[string]int{}
	}
	o.merged.stats.keys = maps.Clone(base.stats.keys)
	if base.stats.values != nil {
		o.merged.stats.values = make(map[string]map[string]int, len(base.stats.values))
		for k, vs := range base.stats.values {
			o.merged.stats.values[k] = maps.Clone(vs)
		}
	}
	count := func(e *Entry, d int) {
		if a, ok := authority(e.Name); ok {
			if o.merged.auths[a] += d; o.merged.auths[a] <= 0 {
				delete(o.merged.auths, a)
			}
		}
		o.merged.stats.count(e.Constraints, d)
	}
	for g, es := range top.groups {
		for _, e := range base.groups[g] {
			count(e, -1)
		}
		for _, e := range es {
			count(e, 1)
		}
	}
	return o
}

func (o *Over) variants(typeURL, name string) []*Entry {
	g := group{typeURL, name}
	if es, ok := o.top.groups[g]; ok {
		return es
	}
	return o.base.groups[g]
}

// Follows is Set.Follows of the two together.
func (o *Over) Follows(n string) bool { return o.merged.Follows(n) }

// Restrict is Set.Restrict of the two together.
func (o *Over) Restrict(p constraint.Params) constraint.Params { return o.merged.Restrict(p) }

// ParamSets is Set.ParamSets of the two together.
func (o *Over) ParamSets() []constraint.Params { return o.merged.ParamSets() }

// Keys is Set.Keys of the two together.
func (o *Over) Keys() []string { return o.merged.Keys() }

// shadowed reports whether the batch replaces a base variant's resource.
func (o *Over) shadowed(e *Entry) bool {
	_, ok := o.top.groups[group{e.Type, e.Name}]
	return ok
}

// referrers calls f with each variant that references g.
func (o *Over) referrers(g group, f func(*Entry)) {
	o.top.referrers[g].each(f)
	o.base.referrers[g].each(func(e *Entry) {
		if !o.shadowed(e) {
			f(e)
		}
	})
}

// referenced reports whether some variant references g.
func (o *Over) referenced(g group) bool {
	if o.top.referrers[g].len() > 0 {
		return true
	}
	return o.base.referrers[g].any(func(e *Entry) bool { return !o.shadowed(e) })
}

// Dangling is, of the references Set.Dangling finds in the two together,
// those from or to a resource the batch gives, in the same order, each
// with the same parameter sets; and maybe some others near them.
func (o *Over) Dangling(wildcard ...string) []Dangling {
	isWild := map[string]bool{}
	for _, t := range wildcard {
		isWild[t] = true
	}
	return o.near(o.ParamSets(), func(typeURL string, referenced bool) bool { return isWild[typeURL] || !referenced })
}

// DanglingAsked is Set.DanglingAsked of the two together, as Dangling is
// Set.Dangling's.
func (o *Over) DanglingAsked(params []constraint.Params, asks Asks) []Dangling {
	return o.near(params, asks)
}

// near follows references only among the resources that may lead to
// one the batch gives: the batch's, and, again and again, those that
// reference one already among them. No other resource can reach them, so
// a walk of the whole set meets these resources' variants, and the
// references from them that resolve to nothing, in the same order as a
// walk of these alone from the roots among them.
func (o *Over) near(params []constraint.Params, asks Asks) []Dangling {
	within := make(map[group]bool, len(o.top.groups))
	queue := make([]group, 0, len(o.top.groups))
	for g := range o.top.groups {
		within[g] = true
		queue = append(queue, g)
	}
	for len(queue) > 0 {
		g := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		o.referrers(g, func(e *Entry) {
			if h := (group{e.Type, e.Name}); !within[h] {
				within[h] = true
				queue = append(queue, h)
			}
		})
	}
	var roots []group
	for g := range within {
		if asks(g.typ, o.referenced(g)) {
			roots = append(roots, g)
		}
	}
	sortGroups(roots)
	return danglingIn(o, len(o.merged.stats.values) > 0, params, roots, within)
}
