package protocol

import (
	"strings"
	"sync"
	"unique"

	"github.com/xdsd/xdsd/internal/db"
)

// memo shares one computation among streams in step: streams whose type
// state has the same subscriptions (signature), holds the same set (a
// shared, copy-on-write heldSet), and has the same work pending at the same
// revision get the same responses and the same next held set. So N streams
// subscribed alike cost one computation and one encoding per change, and
// each stream only sends (docs/architecture.md §5). Only the current revision's
// entries are kept.
type memo struct {
	mu  sync.Mutex
	rev int64
	m   map[memoKey]*memoEntry
}

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
	dncSince  int64 // HonorDoNotCache: the revision the watches began at
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
	if e, ok := m.m[k]; ok {
		return e, false
	}
	e := &memoEntry{done: make(chan struct{})}
	m.m[k] = e
	return e, true
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
