package protocol

import (
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// out is one response ready to send.
type out struct {
	typ      *resource.Type
	counters *typeCounters
	enc      Encoded
	items    int
	since    time.Time
}

// collect computes every response due, in ADS make-before-break order
// (docs/protocol.md §1.9): clusters, endpoints, listeners, routes, virtual hosts,
// then the rest; and when other types change in the same round, removals of
// clusters and endpoints go last, after the routes that stopped using them.
func (s *stream) collect() []out {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changedBuf [4]db.Changed
	changed := changedBuf[:0]
	since := s.sub.DrainFunc(func(c db.Changed) { changed = append(changed, c) })
	for _, c := range changed {
		if ts := s.knownType(c.Type); ts != nil {
			ts.markDirty(c.Name, since)
		}
	}
	var buf [4]*typeState
	busy := buf[:0]
	beats := false
	// The slice, not the map: starting a map's iteration was 15 % of
	// collect's time in a fan-out (two per response: the second finds
	// nothing due).
	for _, ts := range s.typeList {
		if ts.busy() {
			busy = append(busy, ts)
		}
		beats = beats || ts.beat
	}
	if len(busy) == 0 && !beats {
		return nil
	}
	if len(busy) > 1 {
		slices.SortFunc(busy, func(a, b *typeState) int {
			if a.typ.Order != b.typ.Order {
				return a.typ.Order - b.typ.Order
			}
			return strings.Compare(a.typ.URL, b.typ.URL)
		})
	}
	var firstBuf [4]*response
	var ownersBuf [4]*typeState
	first, owners := firstBuf[:0], ownersBuf[:0]
	var last []*response
	var lastOwners []*typeState
	s.srv.db.Read(func(r *db.Reader) {
		rev := r.Rev()
		version := versionOf(rev)
		deferRemovals := s.fixedType == "" && len(busy) > 1
		for _, ts := range busy {
			now, later := s.compute(r, ts, rev, version, deferRemovals && breaks(ts.typ))
			if now != nil {
				first, owners = append(first, now), append(owners, ts)
			}
			if later != nil {
				last, lastOwners = append(last, later), append(lastOwners, ts)
			}
			if s.ttl && s.delta && ts.hbEvery == 0 && r.HasTTL(ts.typ.URL) {
				// Variants with a TTL exist: a first round soon finds
				// whether the client holds any (some may never have been
				// sent on this stream: declared on reconnection) and how
				// often they need renewing.
				ts.hbEvery, ts.hbAt = heartbeatProbe, time.Now()
			}
		}
	})
	// The run loop sends the responses before it collects again, so the
	// stream keeps one slice for them.
	res := s.outs[:0]
	for i, r := range append(first, last...) {
		ts := append(owners, lastOwners...)[i]
		res = append(res, s.finish(ts, r))
	}
	for _, ts := range busy {
		ts.since = time.Time{}
	}
	if beats {
		res = s.heartbeats(res)
	}
	s.outs = res
	return res
}

// heartbeatProbe is how soon after a response the first heartbeat round
// looks at what a client holds, and minHeartbeat the shortest interval
// between rounds (an upstream's TTLs may be shorter than xdsd allows).
const (
	heartbeatProbe = 50 * time.Millisecond
	minHeartbeat   = 25 * time.Millisecond
)

// heartbeatsDue marks the types whose heartbeat round is due at now.
func (s *stream) heartbeatsDue(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.types {
		if ts.hbEvery > 0 && !now.Before(ts.hbAt.Add(ts.hbEvery)) {
			if !s.delta && ts.typ.FullState {
				// SotW, full state: the heartbeat is the whole state again
				// (see ttlFeature); finish sets the next round.
				ts.mustReply, ts.hbAt, ts.hbEvery = true, now, 0
				continue
			}
			ts.beat = true
		}
	}
}

// nextTimer is when the stream's timer must next fire, if at all: for a
// heartbeat round, or to stop a SotW full state from waiting longer for
// names the source has not answered.
func (s *stream) nextTimer() (time.Time, bool) {
	if !s.ttl && !s.rechecks.Load() {
		return time.Time{}, false // the common case: nothing timed, no lock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	earlier := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for _, ts := range s.types {
		if ts.hbEvery > 0 {
			earlier(ts.hbAt.Add(ts.hbEvery))
		}
		if ts.recheck && !ts.pendingSince.IsZero() {
			earlier(ts.pendingSince.Add(s.srv.policy.PendingWait))
		}
	}
	return next, !next.IsZero()
}

// timerDue marks what is due at now: heartbeat rounds, and full states
// that have waited long enough.
func (s *stream) timerDue(now time.Time) {
	s.heartbeatsDue(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.types {
		if ts.recheck && !ts.pendingSince.IsZero() && !now.Before(ts.pendingSince.Add(s.srv.policy.PendingWait)) {
			ts.recheck = false
			ts.markRequested()
		}
	}
}

// heartbeats appends a heartbeat response for each type whose round is
// due: every variant with a TTL the client holds, as name, version and TTL
// without the payload, which renews the TTL (docs/protocol.md §2.7). A round
// covers all of them, every half of the shortest TTL sent, so each is
// renewed well within its own. s.mu is held.
func (s *stream) heartbeats(res []out) []out {
	now := time.Now()
	for _, ts := range s.types {
		if !ts.beat {
			continue
		}
		ts.beat = false
		r := &response{typeURL: ts.typ.URL, version: ts.sentVersion}
		if !s.delta {
			// A SotW heartbeat goes under the version the client ACKed
			// last: Envoy takes a payload-less resource in a response of
			// that version as a heartbeat (grpc_mux_impl isHeartbeatResource).
			if ts.ackVersion == "" || ts.ackVersion != ts.sentVersion {
				// Not in step: a newer response is on its way, which
				// renews the TTLs it carries. The next round, then.
				ts.hbAt = now
				continue
			}
			r.sotw = true
		}
		var shortest time.Duration
		for n, h := range ts.held.m {
			for _, hv := range h.variants {
				if hv.v != nil && hv.v.TTL > 0 && hv.version == hv.v.Version {
					r.items = append(r.items, item{v: hv.v, name: n, tp2: hv.tp2, ttl: true, heartbeat: true})
					if shortest == 0 || hv.v.TTL < shortest {
						shortest = hv.v.TTL
					}
				}
			}
		}
		ts.hbAt = now
		if len(r.items) == 0 {
			ts.hbEvery = 0 // nothing with a TTL is held any more
			continue
		}
		ts.hbEvery = max(shortest/2, minHeartbeat)
		slices.SortFunc(r.items, func(a, b item) int { return strings.Compare(a.name, b.name) })
		res = append(res, s.finish(ts, r))
	}
	return res
}

// breaks reports whether a type's removals wait until the end of a round
// (make-before-break).
func breaks(t *resource.Type) bool {
	return t.URL == resource.ClusterURL || t.URL == resource.EndpointURL
}

// finish gives a response its nonce and encoding and records it as sent.
func (s *stream) finish(ts *typeState, r *response) out {
	s.nonces++
	field, nonce := newNonce(protoNonce(s.delta), s.nonces)
	enc := Encoded{Body: r.encoded(s.srv.cache), Nonce: field}
	now := time.Now()
	ts.nonce, ts.sentVersion, ts.sentAt = nonce, r.version, now
	if s.ttl {
		// Heartbeat rounds come every half of the shortest TTL held: one
		// sent now may be shorter than those before.
		for _, it := range r.items {
			if it.ttl && !it.heartbeat {
				if every := max(it.v.TTL/2, minHeartbeat); ts.hbEvery == 0 || every < ts.hbEvery {
					if ts.hbEvery == 0 {
						ts.hbAt = now
					}
					ts.hbEvery = every
				}
			}
		}
	}
	if s.delta {
		ts.remember(sent{nonce, r.version})
	}
	return out{typ: ts.typ, counters: ts.counters(s.srv.metrics), enc: enc, items: len(r.items) + len(r.removed) + len(r.removedNames), since: ts.since}
}

// maxRecent is how many of its last delta responses a stream takes an
// ACK or NACK for.
const maxRecent = 16

func protoNonce(delta bool) protowire.Number {
	if delta {
		return deltaNonce
	}
	return sotwNonce
}

// computeSotW builds the SotW response due for one type, if any. With
// deferRemovals, a full-state response first keeps the resources it would
// drop, and a second response drops them.
// pendingBlocks says whether a SotW full state must wait for the source:
// while a wildcard's first answer is pending, or a name the client holds
// is (leaving it out would delete it there) — or, for Policy.PendingWait,
// a name it does not hold yet: left out, such a name is only not there yet.
func (s *stream) pendingBlocks(ts *typeState, w *want) bool {
	if w.pendingWildcard {
		return true
	}
	for n, h := range ts.held.m {
		if !h.absent && w.isPending(n) {
			return true
		}
	}
	now := time.Now()
	if ts.pendingSince.IsZero() {
		ts.pendingSince = now
	}
	if now.Sub(ts.pendingSince) >= s.srv.policy.PendingWait {
		return false
	}
	ts.recheck = true
	s.rechecks.Store(true)
	return true
}

func (s *stream) computeSotW(r *db.Reader, ts *typeState, version string, deferRemovals bool) (now, later *response) {
	full := ts.typ.FullState || ts.dirtyAll
	var only map[string]struct{}
	if !full {
		only = make(map[string]struct{}, len(ts.dirty)+len(ts.force))
		for n := range ts.dirty {
			only[n] = struct{}{}
		}
		for n := range ts.force {
			only[n] = struct{}{}
		}
	}
	w := ts.desire(r, intent{only: only, sotw: true, wrapAll: s.wrap, ttl: s.ttl, honorDNC: s.srv.policy.HonorDoNotCache, hidden: s.hidden(ts.typ.URL), node: s.node.GetId()})
	if len(ts.forceWatches) > 0 {
		full = true // a new watch: the full state comes from desire's forced items
	}
	if ts.typ.FullState && w.pending && s.pendingBlocks(ts, w) {
		// A full state would say the names not known yet do not exist:
		// wait, keeping what is due, until the source answers for them.
		ts.dirty = nil
		return nil, nil
	}
	ts.pendingSince = time.Time{}
	defer ts.reset()
	resp := &response{typeURL: ts.typ.URL, sotw: true, version: version}
	changed := false
	if ts.typ.FullState {
		// §1.7: every subscribed resource, every time; a missing one is
		// deleted, so a change includes removals.
		for _, n := range w.order {
			for _, it := range w.byName[n] {
				resp.items = append(resp.items, it)
				if it.forced || !ts.held.get(n).has(it) {
					changed = true
				}
			}
		}
		var dropped []item
		for n, h := range ts.held.m {
			if _, ok := w.byName[n]; !ok && !h.absent {
				changed = true
				for _, hv := range h.variants {
					if hv.v != nil {
						dropped = append(dropped, item{v: hv.v, name: n, tp2: hv.tp2, wrap: hv.tp2})
					}
				}
			}
		}
		if !changed && !ts.mustReply {
			return nil, nil
		}
		if deferRemovals && len(dropped) > 0 {
			sort.Slice(dropped, func(i, j int) bool { return dropped[i].name < dropped[j].name })
			keep := &response{typeURL: resp.typeURL, sotw: true, version: version, items: append(append([]item(nil), resp.items...), dropped...)}
			ts.held = heldByName(w)
			return keep, resp
		}
		ts.held = heldByName(w)
		return resp, nil
	}
	// Other types may be split across responses (§1.7): send what is new,
	// changed or newly asked for.
	for _, n := range w.order {
		for _, it := range w.byName[n] {
			if it.forced || !ts.held.get(n).has(it) {
				resp.items = append(resp.items, it)
			}
		}
		ts.setHeld(n, heldFrom(w.byName[n]))
	}
	if full {
		for n := range ts.held.m {
			if _, ok := w.byName[n]; !ok {
				ts.delHeld(n)
			}
		}
	} else {
		for n := range only {
			if _, ok := w.byName[n]; !ok {
				ts.delHeld(n)
			}
		}
	}
	if resp.empty() {
		return nil, nil
	}
	return resp, nil
}

func heldByName(w *want) *heldSet {
	m := make(map[string]*held, len(w.byName))
	for n, items := range w.byName {
		m[n] = heldFrom(items)
	}
	return &heldSet{m: m}
}

func (ts *typeState) reset() {
	clear(ts.dirty) // kept: the next change reuses it
	ts.force, ts.forceWatches, ts.deniedAnswer = nil, nil, nil
	ts.dirtyAll, ts.mustReply = false, false
}

// computeDelta builds the delta response due for one type, if any: what
// changed for the client, and what it must drop (docs/protocol.md §2). With
// deferRemovals the drops go in a second response.
func (s *stream) computeDelta(r *db.Reader, ts *typeState, version string, deferRemovals bool) (now, later *response) {
	keepReply := false
	defer func() {
		ts.reset()
		ts.mustReply = keepReply
	}()
	// Virtual hosts resolve by domain across the whole route configuration,
	// so any change may move an alias: recompute them all.
	full := ts.dirtyAll || ts.typ.URL == resource.VirtualHostURL
	var only map[string]struct{}
	if !full {
		only = ts.dirty
	}
	w := ts.desire(r, intent{only: only, ttl: s.ttl && ts.typ.URL != resource.VirtualHostURL, honorDNC: s.srv.policy.HonorDoNotCache, hidden: s.hidden(ts.typ.URL), node: s.node.GetId()})
	resp := &response{typeURL: ts.typ.URL, version: version}
	rem := &response{typeURL: ts.typ.URL, version: version}

	considered := map[string]struct{}{}
	if full {
		for n := range ts.held.m {
			considered[n] = struct{}{}
		}
	} else {
		for n := range only {
			considered[n] = struct{}{}
		}
	}
	for n := range ts.force {
		considered[n] = struct{}{}
	}
	for _, n := range w.order {
		considered[n] = struct{}{}
	}
	for n := range w.absent {
		considered[n] = struct{}{}
	}
	for n := range w.globs {
		considered[n] = struct{}{}
	}
	names := make([]string, 0, len(considered))
	for n := range considered {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		items, wanted := w.byName[n]
		h := ts.held.get(n)
		forcedAbsent, isAbsent := w.absent[n]
		if g, ok := w.globs[n]; ok {
			forcedAbsent, isAbsent = g, true
		}
		switch {
		case wanted:
			for _, it := range items {
				if it.forced || !h.has(it) {
					resp.items = append(resp.items, it)
				}
			}
			// A variant the client holds with its constraints but should no
			// longer hold goes by removed_resource_names, in the same
			// response as its replacement (TP2: one response).
			if h != nil {
				for _, hv := range h.variants {
					if hv.tp2 && hv.v != nil && !hasVariant(items, hv.ckey) {
						resp.removedNames = append(resp.removedNames, removal{name: n, cons: hv.v.Constraints.Proto(), ckey: hv.ckey})
					}
				}
			}
			// A new TP2 subscription that no variant matches, while other
			// subscriptions of the name are answered, is told so: a removal
			// naming the variant its parameters would select (TP2: the
			// server acts as if the resource did not exist for it).
			for _, nm := range w.noMatch[n] {
				if !nm.forced {
					continue
				}
				c := constraint.Selecting(nm.params, variantKeys(r.Variants(ts.typ.URL, n)))
				if ck := c.Key(); !hasRemoval(resp.removedNames, n, ck) {
					resp.removedNames = append(resp.removedNames, removal{name: n, cons: c.Proto(), ckey: ck})
				}
			}
			ts.setHeld(n, heldFrom(items))
		case isAbsent:
			target := resp
			if h != nil && !h.absent && deferRemovals {
				target = rem
			}
			if h == nil || !h.absent || forcedAbsent {
				removeHeld(target, n, h)
			}
			ts.setHeld(n, &held{absent: true})
		case h != nil && !h.absent && w.isPending(n):
			// Subscribed, but not known yet (a relay fetching it again):
			// the client keeps what it has until the source answers.
		case h != nil:
			// Held but no longer wanted: deleted (or no variant matches the
			// client any more) while still subscribed, which the client must
			// be told; or no longer subscribed, which it knows.
			if h.absent || !stillCovered(r, ts, n, s.node.GetId()) {
				ts.delHeld(n)
				continue
			}
			target := resp
			if deferRemovals {
				target = rem
			}
			removeHeld(target, n, h)
			ts.setHeld(n, &held{absent: true})
		}
	}
	// Names the policy denies are told removed, as if they did not exist,
	// and nothing of them is kept (a name also held — declared on
	// reconnection — was dropped above, uncovered).
	if len(ts.deniedAnswer) > 0 {
		denied := make([]string, 0, len(ts.deniedAnswer))
		for n := range ts.deniedAnswer {
			if _, wanted := w.byName[n]; !wanted {
				denied = append(denied, n)
			}
		}
		sort.Strings(denied)
		have := make(map[string]bool, len(resp.removed))
		for _, n := range resp.removed {
			have[n] = true
		}
		for _, n := range denied {
			if !have[n] {
				resp.removed = append(resp.removed, n)
			}
		}
	}
	if !rem.empty() {
		later = rem
	}
	if resp.empty() && ts.mustReply && w.pendingWildcard {
		// A wildcard's first answer waits for the source's; an empty one
		// would say there is nothing.
		keepReply = true
	} else if !resp.empty() || ts.mustReply {
		now = resp
	}
	if now == nil && later != nil {
		now, later = later, nil
	}
	return now, later
}

// variantKeys is the union of the keys a resource's variants constrain.
func variantKeys(vs []*resource.Variant) []string {
	var keys []string
	for _, v := range vs {
		keys = append(keys, v.Constraints.Keys()...)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func hasRemoval(rs []removal, n, ckey string) bool {
	for _, r := range rs {
		if r.name == n && r.ckey == ckey {
			return true
		}
	}
	return false
}

func hasVariant(items []item, ckey string) bool {
	for _, it := range items {
		if it.v != nil && it.v.Constraints.Key() == ckey {
			return true
		}
	}
	return false
}

// removeHeld tells the client to drop what it holds under n: by name, or by
// resource_name for variants it was sent with their constraints.
// computeDelta removes names in sorted order, each once, so n can only
// repeat the last name removed: checking that one, not the whole list,
// keeps a request of many missing names linear (a search of the list made
// 99,000 of them take minutes).
func removeHeld(r *response, n string, h *held) {
	add := func() {
		if k := len(r.removed); k == 0 || r.removed[k-1] != n {
			r.removed = append(r.removed, n)
		}
	}
	if h != nil {
		for _, hv := range h.variants {
			if hv.tp2 && hv.v != nil && !hv.v.Constraints.IsZero() {
				r.removedNames = append(r.removedNames, removal{name: n, cons: hv.v.Constraints.Proto(), ckey: hv.ckey})
				continue
			}
			add()
		}
	}
	if h == nil || len(h.variants) == 0 {
		add()
	}
}

// stillCovered reports whether some watch of ts still covers n, so that
// its disappearance is a deletion rather than an unsubscription. A virtual
// host the client knows counts as deleted only when it is gone from the db:
// an alias that now resolves elsewhere leaves it with the client. While
// a revision is staged, it is gone when it is gone from every view the
// stream's watches read (node is the stream's node id).
func stillCovered(r *db.Reader, ts *typeState, n, node string) bool {
	if ts.typ.URL == resource.VirtualHostURL {
		if r.Stage() == nil || len(ts.ws.m) == 0 {
			return len(r.Variants(ts.typ.URL, n)) == 0
		}
		for _, wt := range ts.ws.m {
			if len(viewOf(r, node, wt.Params).Variants(ts.typ.URL, n)) > 0 {
				return false
			}
		}
		return true
	}
	g, inGlob := db.InGlob(n)
	for k := range ts.ws.m {
		if k.Name == n || k.Name == db.Wildcard || (inGlob && k.Name == g) {
			return true
		}
	}
	return false
}
