package clientcheck

import (
	"github.com/xdsd/xdsd/internal/refs"
)

// GroupPlan is what a batch would do to one group of the fleet: the
// variants its clients would newly get, lose and keep, and what they
// would NACK or wait for in vain (apply --dry-run).
type GroupPlan struct {
	Group
	// Get, Lose and Keep name variants ("cluster c [env=prod]"): those
	// the group would get and does not now, those it gets now and would
	// not, and those of the resources the batch gives that it gets now
	// and would still; at most the plan's list of each, the counts say
	// how many there are.
	Get       []string `json:"get"`
	Lose      []string `json:"lose"`
	Keep      []string `json:"keep"`
	GetCount  int      `json:"get_count"`
	LoseCount int      `json:"lose_count"`
	KeepCount int      `json:"keep_count"`
	// Refusals are the findings that refuse the batch for this group:
	// what it would NACK and why, and the references it would wait for.
	Refusals []string `json:"refusals,omitempty"`
}

// Plan works out, for each group of the fleet, what the batch changes in
// what its clients get: before is what the store holds now (every
// stored variant), and what the checker holds (the batch on top of the
// store) is after. findings are the checker's Findings. Each list names
// at most list variants (all when list < 0). Nil when no fleet is known.
func (k *Checker) Plan(before *refs.Set, findings []Finding, list int) []GroupPlan {
	var out []GroupPlan
	for _, g := range k.groups {
		ask := asks(k.ruleOf(g) != GRPC)
		p := GroupPlan{Group: g, Get: []string{}, Lose: []string{}, Keep: []string{}}
		held := before.ReachAsked(g.Params, ask)
		now := make(map[string]bool, len(held))
		for _, e := range held {
			now[e.Describe()] = true
		}
		next := map[string]bool{}
		add := func(l *[]string, n *int, s string) {
			if list < 0 || len(*l) < list {
				*l = append(*l, s)
			}
			*n++
		}
		for _, e := range k.set.ReachAsked(g.Params, ask) {
			d := e.Describe()
			next[d] = true
			switch {
			case !now[d]:
				add(&p.Get, &p.GetCount, d)
			case k.inBatch(e.Type, e.Name):
				add(&p.Keep, &p.KeepCount, d)
			}
		}
		for _, e := range held {
			if d := e.Describe(); !next[d] {
				add(&p.Lose, &p.LoseCount, d)
			}
		}
		key := g.Agent + "\x00" + g.Params.Key()
		for _, f := range findings {
			if f.Severity != Error {
				continue
			}
			for _, h := range f.Groups {
				if h.Agent+"\x00"+h.Params.Key() == key {
					p.Refusals = append(p.Refusals, f.String())
					break
				}
			}
		}
		out = append(out, p)
	}
	return out
}
