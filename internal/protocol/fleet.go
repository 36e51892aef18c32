package protocol

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
)

// The fleet index's questions (docs/fleet.md). The db knows who
// subscribes to each resource and its subscribers point at their streams
// (db.Subscriber.Owner); each stream keeps its own status; the counters of
// groups live in a fleet.Index. Nothing here walks every stream to answer
// a question about some resources, and nothing serializes a status.

// Changed names resources by type URL: the question "who does a change of
// these concern".
type Changed map[string][]string

// Concerned reports the streams a change of the resources in ch reaches
// — by name, wildcard, glob collection or on-demand VHDS name — in
// connection order. Each Client carries only the types of ch, each
// type's subscriptions that take in a changed name, and what it holds of
// the changed names: enough to tell whether it subscribes with parameters
// a variant matches, and what it ACKed or NACKed. The cost is the
// subscribers of the changed resources, not the fleet.
func (s *Server) Concerned(ch Changed) []StreamStatus {
	streams := s.subscribers(ch)
	if len(streams) == 0 {
		return nil
	}
	q := newChangeQuery(ch)
	out := make([]StreamStatus, 0, len(streams))
	for _, st := range streams {
		out = append(out, st.statusOf(q))
	}
	return out
}

// changeQuery is Changed made ready to test subscriptions against: per
// type, the changed names and the glob collections holding them.
type changeQuery map[string]*typeQuery

type typeQuery struct {
	names map[string]bool
	globs map[string]bool
	rcs   map[string]bool // VirtualHost: route configurations of the changed names
}

func newChangeQuery(ch Changed) changeQuery {
	q := changeQuery{}
	for typ, names := range ch {
		tq := &typeQuery{names: make(map[string]bool, len(names)), globs: map[string]bool{}, rcs: map[string]bool{}}
		for _, n := range names {
			tq.names[n] = true
			if g, ok := db.InGlob(n); ok {
				tq.globs[g] = true
			}
			if i := strings.LastIndexByte(n, '/'); i >= 0 {
				tq.rcs[n[:i]] = true
			}
		}
		q[typ] = tq
	}
	return q
}

// covers reports whether subscription w takes in a changed name.
func (tq *typeQuery) covers(w *db.Sub) bool {
	switch w.Kind {
	case db.AllOfType:
		return true
	case db.Glob:
		return tq.globs[w.Name]
	case db.VHDS:
		return tq.names[w.Name] || tq.rcs[w.Name[:max(strings.LastIndexByte(w.Name, '/'), 0)]]
	}
	return tq.names[w.Name]
}

// subscribers collects the streams subscribed to the resources of ch, in
// connection order. The db is read first and the streams' locks taken
// after: a stream reads the db with its lock held.
func (s *Server) subscribers(ch Changed) []*stream {
	seen := map[*db.Subscriber]bool{}
	var streams []*stream
	s.db.Read(func(r *db.Reader) {
		for typ, names := range ch {
			for _, n := range names {
				r.Subscribers(typ, n, seen, func(sub *db.Subscriber) {
					if st, ok := sub.Owner.(*stream); ok && st.srv == s {
						streams = append(streams, st)
					}
				})
			}
		}
	})
	sort.Slice(streams, func(i, j int) bool { return streams[i].id < streams[j].id })
	return streams
}

// statusOf is status limited to the types and names of q.
func (st *stream) statusOf(q changeQuery) StreamStatus {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.header()
	for typ, tq := range q {
		ts := st.types[typ]
		if ts == nil {
			continue
		}
		t := ts.status(false)
		for _, w := range ts.ws.sorted {
			if tq.covers(w) {
				t.Subscriptions = append(t.Subscriptions, Subscription{Name: w.Name, Params: w.Params, Locator: w.Locator})
			}
		}
		// Whichever is smaller: what it holds, or what changed.
		if len(ts.held.m) < len(tq.names) {
			for n := range ts.held.m {
				if tq.names[n] {
					t.Held = ts.appendHeld(t.Held, n)
				}
			}
		} else {
			for n := range tq.names {
				t.Held = ts.appendHeld(t.Held, n)
			}
		}
		sortHeld(t.Held)
		c.Types = append(c.Types, t)
	}
	sort.Slice(c.Types, func(i, j int) bool { return c.Types[i].Type < c.Types[j].Type })
	return c
}

// Groups reports the connected streams by agent and parameter set
// (fleet.Index): counters kept as streams subscribe and go, read without
// looking at any stream but one per group, whose holdings it reports.
func (s *Server) Groups() []fleet.Group {
	gs := s.fleet.Groups()
	for i := range gs {
		if st, ok := gs[i].Sample.(*stream); ok {
			gs[i].Holds = st.holdings()
		}
		gs[i].Sample = nil
	}
	return gs
}

// maxHoldings bounds the lines of what a group holds.
const maxHoldings = 6

// holdings sums up what a stream holds, per type: how many resources, and
// the distinct variants' constraints and versions (the first few).
func (st *stream) holdings() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []string
	for _, ts := range st.types {
		n, absent := 0, 0
		variants := map[string]bool{}
		for _, h := range ts.held.m {
			if h.absent && len(h.variants) == 0 {
				absent++
			}
			for _, hv := range h.variants {
				n++
				if hv.v != nil && !hv.v.Constraints.IsZero() {
					variants[hv.v.Constraints.String()] = true
				}
			}
		}
		line := fmt.Sprintf("%s: %d", ts.typ.Name, n)
		if ts.ackVersion != "" {
			line += " @" + ts.ackVersion
		}
		if absent > 0 {
			line += fmt.Sprintf(", %d missing", absent)
		}
		if len(variants) > 0 {
			vs := slices.Sorted(maps.Keys(variants))
			if len(vs) > 3 {
				vs = append(vs[:3], "…")
			}
			line += " [" + strings.Join(vs, "; ") + "]"
		}
		out = append(out, line)
	}
	slices.Sort(out)
	if len(out) > maxHoldings {
		out = append(out[:maxHoldings], fmt.Sprintf("… and %d more types", len(out)-maxHoldings))
	}
	return out
}

// ClientQuery selects streams for a page of the fleet: by node id
// (a substring), and a window of the matches in connection order.
type ClientQuery struct {
	Node   string
	Offset int
	Limit  int // 0: all
}

// ClientPage is one page of streams and how many matched.
type ClientPage struct {
	Clients []StreamStatus
	Matched int
}

// Page reports the streams a query selects. Only the node ids of the
// streams are looked at to select them; only the selected ones report
// their status.
func (s *Server) Page(q ClientQuery) ClientPage {
	streams := s.sortedStreams()
	var sel []*stream
	matched := 0
	for _, st := range streams {
		if q.Node != "" && !strings.Contains(st.nodeID(), q.Node) {
			continue
		}
		if matched >= q.Offset && (q.Limit <= 0 || len(sel) < q.Limit) {
			sel = append(sel, st)
		}
		matched++
	}
	p := ClientPage{Matched: matched, Clients: make([]StreamStatus, 0, len(sel))}
	for _, st := range sel {
		p.Clients = append(p.Clients, st.status())
	}
	return p
}

// sortedStreams lists the streams in connection order.
func (s *Server) sortedStreams() []*stream {
	s.mu.Lock()
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	sort.Slice(streams, func(i, j int) bool { return streams[i].id < streams[j].id })
	return streams
}

func (st *stream) nodeID() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.node.GetId()
}
