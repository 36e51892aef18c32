package db

import (
	"slices"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/resource"
)

// Stage is a staged revision as the db serves it (docs/rollouts.md): its
// changes are in the db like any other, and Prev holds, for each
// resource it changed, the variants it had before — what a stream
// outside the canary keeps being served, under their previous versions.
// So the db holds two sets of variants for what changed, encoded once
// each, and none per stream.
type Stage struct {
	Rev    int64
	Canary canary.Spec
	// Prev maps each resource the revision changed (Key.Constraints
	// empty) to its variants before it, sorted by constraint key; none
	// for a resource the revision created.
	Prev map[resource.Key][]*resource.Variant

	// vhdsRCs are the route configurations of the virtual hosts in Prev:
	// their on-demand VHDS aliases resolve outside the index for a
	// stream outside the canary (Reader.resolveStaged). Set by setStage.
	vhdsRCs map[string]bool
}

// names lists the names of st's resources by type.
func (st *Stage) names() map[string][]string {
	out := map[string][]string{}
	if st == nil {
		return out
	}
	for k := range st.Prev {
		out[k.Type] = append(out[k.Type], k.Name)
	}
	return out
}

// setStage makes st the stage served, marking the subscribers of what the
// old and the new stage cover: streams outside a canary see those names
// change when a stage begins or ends. Called under d.mu.
func (d *DB) setStage(st *Stage, m *marker) {
	if st == d.stage {
		return
	}
	for _, s := range []*Stage{d.stage, st} {
		for typ, names := range s.names() {
			t := d.tables[typ]
			if t == nil {
				continue
			}
			for _, n := range names {
				m.named(t, n)
			}
		}
	}
	if st != nil && st.vhdsRCs == nil {
		st.vhdsRCs = map[string]bool{}
		for k := range st.Prev {
			if k.Type == resource.VirtualHostURL {
				st.vhdsRCs[vhdsRouteConfig(k.Name)] = true
			}
		}
	}
	d.stage = st
	d.outside.stage = st
}

// named marks every subscriber that covers name n: of the resource, the
// wildcard, and its glob collection.
func (m *marker) named(t *table, n string) {
	if e := t.entries[n]; e != nil {
		for s := range e.subs {
			m.mark(s, t.typ.URL, n)
		}
	}
	for s := range t.wildcard {
		m.mark(s, t.typ.URL, n)
	}
	if g, ok := InGlob(n); ok && t.globs[g] != nil {
		for s := range t.globs[g].subs {
			m.mark(s, t.typ.URL, n)
		}
	}
	if t.vhds != nil {
		// On-demand VHDS subscribers of its route configuration: an
		// alias may resolve to another virtual host in the other view.
		if ns := t.vhds[vhdsRouteConfig(n)]; ns != nil {
			for s := range ns.subs {
				m.mark(s, t.typ.URL, n)
			}
		}
	}
}

// Stage is the staged revision being served, or nil.
func (r *Reader) Stage() *Stage { return r.d.stage }

// Outside returns the view of a stream outside the staged revision's
// canary: what the revision changed is read as it was before it. With
// nothing staged it is r.
func (r *Reader) Outside() *Reader {
	if r.d.stage == nil {
		return r
	}
	return &r.d.outside
}

// prev returns, for a reader outside the canary, the variants of a
// resource the staged revision changed, and whether it changed it.
func (r *Reader) prev(typeURL, n string) ([]*resource.Variant, bool) {
	if r.stage == nil {
		return nil, false
	}
	vs, ok := r.stage.Prev[resource.Key{Type: typeURL, Name: n}]
	return vs, ok
}

func selectFrom(vs []*resource.Variant, p map[string]string) *resource.Variant {
	for _, v := range vs {
		if v.Constraints.Match(p) {
			return v
		}
	}
	return nil
}

// stagedNames adds to names (sorted) the names of typeURL that the stage
// covers and keep is true of, for a reader outside the canary: a
// resource the staged revision deleted is still there for it.
func (r *Reader) stagedNames(typeURL string, names []string, keep func(string) bool) []string {
	if r.stage == nil {
		return names
	}
	for k, vs := range r.stage.Prev {
		if k.Type != typeURL || len(vs) == 0 || !keep(k.Name) {
			continue
		}
		if i, found := slices.BinarySearch(names, k.Name); !found {
			names = append(names, "")
			copy(names[i+1:], names[i:])
			names[i] = k.Name
		}
	}
	return names
}
