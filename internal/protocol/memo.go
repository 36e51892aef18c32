package protocol

import (
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/xdsd/xdsd/internal/db"
)

// memo shares one computation among streams in step: streams whose type
// state has the same subscriptions (signature), holds the same set (a
// shared, copy-on-write heldSet), and has the same work pending at the same
// revision get the same responses and the same next held set. So N streams
// subscribed alike cost one computation and one encoding per change, and
// each stream only sends (docs/architecture.md §5).
//
// Entries are worth keeping only while streams in step still come for
// them: the fan-out of one change. So only the current revision's entries
// are kept, and those are dropped once the memo has gone unused for
// memoIdle (or the last stream ends) — entries hold their streams' held
// sets and responses, and must not outlive the streams (a client opening
// and closing streams with distinct name sets would otherwise grow the
// server until the next revision).
type memo struct {
	mu    sync.Mutex
	rev   int64
	m     map[memoKey]*memoEntry
	used  bool        // got since the sweeper last looked
	sweep *time.Timer // runs while m holds entries
}

// memoIdle is how long the memo keeps entries nobody asks for.
const memoIdle = 2 * time.Second

type memoKey struct {
	typ       string
	delta     bool
	wrap      bool
	ttl       bool
	sig       unique.Handle[string]
	held      *heldSet
	rev       int64
	dirty     string // the pending names, sorted, NUL-joined
	all       bool   // dirtyAll
	mustReply bool
	newWatch  bool // every watch is new (a first subscription)
	deferRm   bool
	dncSince  int64  // HonorDoNotCache: the revision the watches began at
	identity  string // with a Guard: what a stream may see depends on it
	// canary, with a revision staged for N% or node=, is 1 for a stream
	// in the canary and 2 for one outside it: they see different
	// variants of what it changed. (A param= canary chooses by the
	// parameters, which the signature holds.)
	canary int8
}

type memoEntry struct {
	done       chan struct{}
	ok         bool // a result to share (a deferred computation is not)
	now, later *response
	held       *heldSet
}

// key says whether ts's work can be shared, and under what key.
func memoKeyFor(s *stream, ts *typeState, rev int64, deferRm bool) (memoKey, bool) {
	if len(ts.force) > 0 || len(ts.ws.m) == 0 {
		return memoKey{}, false
	}
	newWatch := false
	if len(ts.forceWatches) > 0 {
		// Only a first subscription — every watch new, nothing held — is
		// shared; other subscription changes are a stream's own.
		if len(ts.forceWatches) != len(ts.ws.m) || ts.held.len() > 0 {
			return memoKey{}, false
		}
		newWatch = true
	}
	k := memoKey{typ: ts.typ.URL, delta: s.delta, wrap: s.wrap, ttl: s.ttl, sig: ts.ws.sig, held: ts.held, rev: rev,
		all: ts.dirtyAll, mustReply: ts.mustReply, newWatch: newWatch, deferRm: deferRm}
	if s.srv.opts.Guard != nil {
		k.identity = s.identity
	}
	// A caching proxy leaves out do_not_cache copies older than a watch
	// (desire), so what it sends depends on when each watch began: streams
	// share only if their watches all began at the same revision.
	first := true
	for _, since := range ts.dncSince {
		if !first && since != k.dncSince {
			return memoKey{}, false
		}
		k.dncSince, first = since, false
	}
	if !ts.dirtyAll && len(ts.dirty) == 1 {
		for n := range ts.dirty {
			k.dirty = n
		}
	} else if !ts.dirtyAll && len(ts.dirty) > 1 {
		names := make([]string, 0, len(ts.dirty))
		for n := range ts.dirty {
			names = append(names, n)
		}
		sortStrings(names)
		k.dirty = strings.Join(names, "\x00")
	}
	return k, true
}

// get returns the entry for k, and whether the caller is the one to fill
// it (and must call fill).
func (m *memo) get(k memoKey) (*memoEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k.rev < m.rev {
		return nil, false
	}
	if k.rev > m.rev || m.m == nil {
		m.rev, m.m = k.rev, map[memoKey]*memoEntry{}
	}
	m.used = true
	if m.sweep == nil {
		m.sweep = time.AfterFunc(memoIdle, m.sweepIdle)
	}
	if e, ok := m.m[k]; ok {
		return e, false
	}
	e := &memoEntry{done: make(chan struct{})}
	m.m[k] = e
	return e, true
}

// sweepIdle drops the entries if nothing used them since the last look,
// and looks again later otherwise.
func (m *memo) sweepIdle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used {
		m.used = false
		m.sweep.Reset(memoIdle)
		return
	}
	m.m, m.sweep = nil, nil
}

// clear drops every entry (the last stream ended, or the server closes).
func (m *memo) clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sweep != nil {
		m.sweep.Stop()
	}
	m.m, m.sweep, m.used = nil, nil, false
}

// compute runs (or shares) one type's computation for a stream.
func (s *stream) compute(r *db.Reader, ts *typeState, rev int64, version string, deferRm bool) (now, later *response) {
	own := func() (*response, *response) {
		if s.delta {
			return s.computeDelta(r, ts, version, deferRm)
		}
		return s.computeSotW(r, ts, version, deferRm)
	}
	k, ok := memoKeyFor(s, ts, rev, deferRm)
	if !ok {
		return own()
	}
	if st := r.Stage(); st != nil && st.Canary.PerNode() {
		k.canary = 2
		if st.Canary.Match(s.node.GetId(), nil) {
			k.canary = 1
		}
	}
	e, first := s.srv.memo.get(k)
	switch {
	case e == nil:
		return own()
	case first:
		now, later = own()
		e.ok = !ts.busy() // deferred work stays pending; not shared
		if e.ok {
			// A set not yet shared is this stream's alone; once shared it
			// is never written again.
			if !ts.held.shared {
				ts.held.shared = true
			}
			e.now, e.later, e.held = now, later, ts.held
		}
		close(e.done)
		return now, later
	}
	<-e.done
	if !e.ok {
		return own()
	}
	ts.reset()
	ts.held = e.held
	return e.now, e.later
}

func sortStrings(s []string) {
	if len(s) < 2 {
		return
	}
	// Pending sets are small; insertion sort avoids sort's allocation.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
