package protocol

import (
	"hash/maphash"
	"maps"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/resource"
)

// newWatch makes a subscription of the stream: by TP2 locator, with the
// locator's parameters; or plainly, with the node metadata's in their
// place (docs/architecture.md §4.5, TP2 "Migrating From Node Metadata").
func (s *stream) newWatch(ts *typeState, n string, locator map[string]string, byLocator bool) *db.Sub {
	p := s.nodeParams
	if byLocator {
		p = s.withAssigned(constraint.Params(locator))
	}
	w := db.NewSub(ts.typ.URL, n, p)
	w.Locator = byLocator
	return &w
}

// begin starts on a request (s.mu held): the type's state, made if new
// (existed says whether it was there before), with the node noted.
func (s *stream) begin(typeURL string, n *corev3.Node) (ts *typeState, existed bool, err error) {
	if typeURL, err = s.requestType(typeURL); err != nil {
		return nil, false, err
	}
	first := s.node == nil
	s.setNode(n)
	if first && s.node != nil {
		if err := s.claim(s.nodeParams, "node metadata"); err != nil {
			return nil, false, err
		}
		s.nodeParams = s.withAssigned(s.nodeParams)
	}
	if first {
		// Counted in the fleet from its first request, under its node's
		// parameters until it subscribes. The node's user_agent_name,
		// when it names an agent, says more than the gRPC header.
		if a := fleet.AgentOf(s.node.GetUserAgentName(), ""); a != fleet.Other {
			s.member.Agent = a
		}
		s.srv.fleet.JoinMember(s.member, s.node.GetId(), s.nodeParams)
	}
	s.requests++
	_, existed = s.types[typeURL]
	if !existed && len(s.types) >= s.srv.opts.MaxSubscriptions {
		// Each type a stream names costs state, subscribed or not.
		return nil, false, status.Errorf(codes.ResourceExhausted, "more than %d resource types on one stream", s.srv.opts.MaxSubscriptions)
	}
	return s.typeState(typeURL), existed, nil
}

// handleSotW applies a SotW request (docs/protocol.md §1).
func (s *stream) handleSotW(req *discoveryv3.DiscoveryRequest) error {
	s.mu.Lock()
	ts, _, err := s.begin(req.GetTypeUrl(), req.GetNode())
	if err != nil {
		s.mu.Unlock()
		return err
	}
	now := time.Now()
	// §1.1: a nonce is valid only on its own stream. Before anything of
	// the type was sent on this one, a nonce is a previous stream's (a
	// client that kept it across a reconnection): not stale, just void.
	if n := req.GetResponseNonce(); n != "" && ts.nonce != "" {
		if n != ts.nonce {
			// §1.8: never answer a request with a stale nonce; the client
			// will send the current state again when the newest response
			// arrives.
			ts.counters(s.srv.metrics).stale.Inc()
			s.mu.Unlock()
			return nil
		}
		s.ackOrNack(ts, n, ts.sentVersion, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil, now)
	}

	// Most requests are ACKs repeating the previous list: nothing changes.
	if ts.sameRequest(req) {
		s.mu.Unlock()
		return nil
	}
	// §1.5: the name list replaces the previous one; "*" is an explicit
	// wildcard, and an empty list is a wildcard only until the client has
	// named something (and only for the types with wildcard semantics).
	next := map[db.Key]*db.Sub{}
	denied := false
	for _, n := range req.GetResourceNames() {
		w := s.newWatch(ts, n, nil, false)
		if s.denies(w) {
			// Not kept; SotW never sends what does not exist.
			denied = true
			continue
		}
		next[w.Key] = w
	}
	for _, l := range req.GetResourceLocators() {
		if err := s.claim(l.GetDynamicParameters(), "resource locator "+truncate(l.GetName(), maxLoggedText)); err != nil {
			s.mu.Unlock()
			return err
		}
		w := s.newWatch(ts, l.GetName(), l.GetDynamicParameters(), true)
		if s.denies(w) {
			denied = true
			continue
		}
		next[w.Key] = w
	}
	if len(next) > 0 || denied {
		ts.everNamed = true
	} else if !ts.everNamed && ts.typ.FullState {
		w := s.newWatch(ts, db.Wildcard, nil, false)
		next[w.Key] = w
	}
	c := s.change(ts)
	for k := range ts.ws.m {
		if _, ok := next[k]; !ok {
			c.drop(k)
		}
	}
	for _, w := range next {
		added, err := c.add(w)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		if added {
			// §1.6: a newly added name is sent even if it was sent before.
			c.force = append(c.force, w)
		}
	}
	// A full state answers a changed list, denied names included (they
	// are answered by their absence).
	c.mustReply = (c.changed || denied) && ts.typ.FullState
	if err := s.reserve(c.bytes); err != nil {
		s.mu.Unlock()
		return err
	}
	s.apply(c)
	return nil
}

// sameRequest reports whether a SotW request names exactly what the last
// one did (an ACK, usually), and remembers it otherwise. It keeps a 128-bit
// digest, not the names, so that an idle stream stays small.
func (ts *typeState) sameRequest(req *discoveryv3.DiscoveryRequest) bool {
	d := requestDigest(req)
	if ts.hasLastReq && d == ts.lastReq {
		return true
	}
	ts.lastReq, ts.hasLastReq = d, true
	return false
}

var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func requestDigest(req *discoveryv3.DiscoveryRequest) [2]uint64 {
	var out [2]uint64
	for i, seed := range digestSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, n := range req.GetResourceNames() {
			h.WriteString(n)
			h.WriteByte(0)
		}
		h.WriteByte(1)
		for _, l := range req.GetResourceLocators() {
			h.WriteString(l.GetName())
			h.WriteByte(0)
			keys := slices.Sorted(maps.Keys(l.GetDynamicParameters()))
			for _, k := range keys {
				h.WriteString(k)
				h.WriteByte(0)
				h.WriteString(l.GetDynamicParameters()[k])
				h.WriteByte(0)
			}
			h.WriteByte(1)
		}
		out[i] = h.Sum64()
	}
	return out
}

// ackOrNack records the client's answer to the response sent with nonce,
// which carried version sent; claimed is the version the request names.
func (s *stream) ackOrNack(ts *typeState, nonce, sent, claimed, msg string, nack bool, now time.Time) {
	if nack {
		// §1.3/§2.1: a NACK is told by error_detail; its version_info is
		// the last version the client accepted, so the rejected one is
		// what this stream sent with the nonce. It is recorded, and
		// nothing is re-sent: only a newer change goes out.
		ts.nack = &Nack{Nonce: nonce, Version: sent, LastGood: claimed, Error: truncate(msg, maxLoggedText), At: now}
		if claimed == sent {
			ts.nack.LastGood = ts.ackVersion
		}
		ts.nacks++
		ts.counters(s.srv.metrics).nacks.Inc()
		if suppressed, ok := s.nackLog.allow(now); ok {
			s.srv.log.Warn("NACK", "stream", s.id, "node", truncate(s.node.GetId(), maxLoggedText), "type", ts.typ.Name, "nonce", nonce,
				"rejected_version", sent, "error", truncate(msg, maxLoggedText), "suppressed_since_last", suppressed)
		}
		return
	}
	if claimed != sent {
		// §1.2: an ACK carries the version it accepts, which is the one
		// sent with its nonce. A request naming another version accepts
		// nothing this stream sent: it is not recorded as an ACK.
		ts.counters(s.srv.metrics).stale.Inc()
		return
	}
	ts.ackVersion, ts.ackNonce, ts.ackAt = sent, nonce, now
	ts.counters(s.srv.metrics).acks.Inc()
}

// declare records what a reconnecting delta client says it holds (§2.9).
// A declared version of a name the request subscribes by locator is
// resolved to the variant it is (a variant's version names it), so that
// its replacement goes out with its deletion by resource_name, in one
// response (TP2); a version no current variant has is held as a version
// alone.
func (s *stream) declare(ts *typeState, req *discoveryv3.DeltaDiscoveryRequest) {
	declared := req.GetInitialResourceVersions()
	if len(declared) == 0 {
		return
	}
	byLocator := map[string]bool{}
	for _, l := range req.GetResourceLocatorsSubscribe() {
		byLocator[db.Canonical(l.GetName())] = true
	}
	s.srv.db.Read(func(r *db.Reader) {
		for n, v := range declared {
			n = db.Canonical(n)
			hv := heldVariant{version: v}
			if byLocator[n] {
				// While a revision is staged, a client may hold a variant
				// of either view, whichever it is in: the staged one (in
				// the canary, or before it moved out) or the one the
				// staged revision replaced. A version names one variant
				// in both.
				if cand := declaredVariant(r, ts.typ.URL, n, v); cand != nil {
					hv = heldVariant{ckey: cand.Constraints.Key(), version: v, v: cand, tp2: true}
				}
			}
			ts.setHeld(n, &held{variants: []heldVariant{hv}})
		}
	})
}

// declaredVariant finds the variant with constraints of resource n whose
// version is v, among the current variants and, while a revision is
// staged, those it replaced; nil when none is.
func declaredVariant(r *db.Reader, typeURL, n, v string) *resource.Variant {
	views := []*db.Reader{r}
	if o := r.Outside(); o != r {
		views = append(views, o)
	}
	for _, view := range views {
		for _, cand := range view.Variants(typeURL, n) {
			if cand.Version == v && !cand.Constraints.IsZero() {
				return cand
			}
		}
	}
	return nil
}

// handleDelta applies a delta request (docs/protocol.md §2).
func (s *stream) handleDelta(req *discoveryv3.DeltaDiscoveryRequest) error {
	s.mu.Lock()
	ts, existed, err := s.begin(req.GetTypeUrl(), req.GetNode())
	if err != nil {
		s.mu.Unlock()
		return err
	}
	now := time.Now()
	if n := req.GetResponseNonce(); n != "" {
		for _, r := range ts.recent {
			if r.nonce == n {
				s.ackOrNack(ts, n, r.version, r.version, req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil, now)
				break
			}
		}
	}
	c := s.change(ts)
	first := !existed
	var declared map[string]bool
	if first && len(req.GetInitialResourceVersions()) > 0 {
		// What a client declares is state the stream keeps, like its
		// subscriptions: it counts against the same bound.
		if s.declared+len(req.GetInitialResourceVersions()) > s.srv.opts.MaxSubscriptions {
			s.mu.Unlock()
			return status.Errorf(codes.ResourceExhausted, "initial_resource_versions: more than %d resources declared on one stream",
				s.srv.opts.MaxSubscriptions)
		}
		for n, v := range req.GetInitialResourceVersions() {
			c.bytes += declaredCost(n, v)
		}
		if err := s.overStream(c.bytes); err != nil {
			s.mu.Unlock()
			return err
		}
		s.declared += len(req.GetInitialResourceVersions())
		// §2.9: a reconnecting client lists what it holds; nothing it
		// already has is sent again (§6.6).
		c.declare = req
		declared = make(map[string]bool, len(req.GetInitialResourceVersions()))
		for n := range req.GetInitialResourceVersions() {
			declared[db.Canonical(n)] = true
		}
	}
	subscribe := func(n string, loc map[string]string, tp2 bool) error {
		if err := s.claim(loc, "resource locator "+truncate(n, maxLoggedText)); err != nil {
			return err
		}
		w := s.newWatch(ts, n, loc, tp2)
		if s.denies(w) {
			// §2.2: answered, as if it did not exist, and not kept.
			c.denied = append(c.denied, w.Name)
			return nil
		}
		if _, err := c.add(w); err != nil {
			return err
		}
		// §2.2: every subscribed name is answered, even when the server
		// believes the client is current, except what the client declared
		// in initial_resource_versions on this same request.
		if !declared[w.Name] && w.Name != db.Wildcard {
			c.force = append(c.force, w)
		}
		if w.Name == db.Wildcard {
			c.mustReply = true
		}
		return nil
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		if err := subscribe(n, nil, false); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	for _, l := range req.GetResourceLocatorsSubscribe() {
		if err := subscribe(l.GetName(), l.GetDynamicParameters(), true); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	// §2.4: an implicit wildcard is a first request with both lists empty;
	// unlike SotW it survives later named subscriptions.
	if first && len(req.GetResourceNamesSubscribe())+len(req.GetResourceLocatorsSubscribe()) == 0 {
		if err := subscribe(db.Wildcard, nil, false); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	unsubscribe := func(n string, loc map[string]string, tp2 bool) {
		w := s.newWatch(ts, n, loc, tp2)
		if _, ok := c.next[w.Key]; !ok && ts.typ.URL == resource.VirtualHostURL {
			// §2.8: a client may unsubscribe a virtual host by its name
			// rather than the alias it subscribed with.
			var drop []db.Key
			s.srv.db.Read(func(r *db.Reader) {
				for wk, wt := range c.next {
					if v := viewOf(r, s.node.GetId(), wt.Params).ResolveVirtualHost(wt.Name, wt.Params); v != nil && v.Name == w.Name {
						drop = append(drop, wk)
					}
				}
			})
			for _, wk := range drop {
				c.drop(wk)
			}
			return
		}
		if !c.drop(w.Key) {
			return // §2.3: unsubscribing an unknown name is ignored
		}
		if w.Name != db.Wildcard && !c.namedBy(w.Name) {
			// §2.3: a name still covered (by a wildcard or a glob) must be
			// sent again; otherwise the client has dropped it. Still
			// subscribed by name (other parameters, or plainly rather than
			// by locator), the client keeps what it holds under that.
			c.forceNames = append(c.forceNames, w.Name)
		}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		unsubscribe(n, nil, false)
	}
	for _, l := range req.GetResourceLocatorsUnsubscribe() {
		unsubscribe(l.GetName(), l.GetDynamicParameters(), true)
	}
	if err := s.reserve(c.bytes); err != nil {
		s.mu.Unlock()
		return err
	}
	s.apply(c)
	return nil
}

// subChange is what one request does to a type's subscriptions. It is
// worked out under the stream's lock; the new subscriptions are made in
// the db with the lock released (in a cache, Subscribe waits for the
// upstream interest hook), before any computation sees them, so none
// misses a change the db would not have marked the stream for; then the
// change is applied under the lock, and what went is unsubscribed last.
type subChange struct {
	ts    *typeState
	next  map[db.Key]*db.Sub // the subscriptions as the request leaves them
	count int                // the stream's subscriptions, all types, then
	max   int                // Options.MaxSubscriptions
	s     *stream            // whose byte limit add checks
	bytes int64              // what the change adds to the stream's subscription state (subCost, declaredCost)
	// force: watches answered even when the client holds what they cover
	// (§1.6, §2.2); forceNames: names sent again (§2.3).
	force      []*db.Sub
	forceNames []string
	changed    bool
	mustReply  bool
	// declare is the first delta request of a type that lists what the
	// client holds (§2.9).
	declare *discoveryv3.DeltaDiscoveryRequest
	// denied: names the policy denies, answered as removed and not kept.
	denied []string
}

// change starts a subChange of ts (s.mu held).
func (s *stream) change(ts *typeState) *subChange {
	return &subChange{ts: ts, next: maps.Clone(ts.ws.m), count: s.watchCount, max: s.srv.opts.MaxSubscriptions, s: s}
}

// add subscribes w, unless it is already; it fails past
// Options.MaxSubscriptions.
func (c *subChange) add(w *db.Sub) (bool, error) {
	if _, ok := c.next[w.Key]; ok {
		return false, nil
	}
	if c.count >= c.max {
		return false, status.Errorf(codes.ResourceExhausted, "more than %d subscriptions on one stream", c.max)
	}
	cost := subCost(w)
	if err := c.s.overStream(c.bytes + cost); err != nil {
		return false, err
	}
	c.bytes += cost
	c.next[w.Key] = w
	c.count++
	c.changed = true
	return true, nil
}

// drop unsubscribes k; it reports whether k was subscribed.
func (c *subChange) drop(k db.Key) bool {
	if _, ok := c.next[k]; !ok {
		return false
	}
	c.bytes -= subCost(c.next[k])
	delete(c.next, k)
	c.count--
	c.changed = true
	return true
}

// namedBy reports whether a subscription names n itself.
func (c *subChange) namedBy(n string) bool {
	for k := range c.next {
		if k.Name == n {
			return true
		}
	}
	return false
}

// apply makes the change: called with s.mu held, it returns with it
// released.
func (s *stream) apply(c *subChange) {
	ts := c.ts
	var added, dropped []*db.Sub
	for k, w := range c.next {
		if _, ok := ts.ws.m[k]; !ok {
			added = append(added, w)
		}
	}
	for k, w := range ts.ws.m {
		if _, ok := c.next[k]; !ok {
			dropped = append(dropped, w)
		}
	}
	var since int64
	if s.srv.policy.HonorDoNotCache && len(added) > 0 {
		since = s.srv.db.Rev()
	}
	for _, w := range added {
		s.srv.fleet.Subscribed(s.member, w.ParamsKey, w.Params, 1)
	}
	for _, w := range dropped {
		s.srv.fleet.Subscribed(s.member, w.ParamsKey, w.Params, -1)
	}
	s.mu.Unlock()
	for _, w := range added {
		s.srv.db.Subscribe(s.sub, *w)
	}
	s.mu.Lock()
	if c.declare != nil {
		s.declare(ts, c.declare)
	}
	if s.srv.policy.HonorDoNotCache {
		if ts.dncSince == nil && len(added) > 0 {
			ts.dncSince = map[db.Key]int64{}
		}
		for _, w := range added {
			ts.dncSince[w.Key] = since
		}
		for _, w := range dropped {
			delete(ts.dncSince, w.Key)
		}
	}
	s.watchCount = c.count
	s.subBytes += c.bytes // the connection's share is reserved (reserve)
	if c.changed {
		ts.ws = s.srv.sets.intern(ts.typ.URL, c.next)
	}
	for _, w := range c.force {
		ts.forceWatch(w)
	}
	for _, n := range c.forceNames {
		ts.forceName(n)
	}
	if c.mustReply {
		ts.mustReply = true
	}
	for _, n := range c.denied {
		if ts.deniedAnswer == nil {
			ts.deniedAnswer = map[string]struct{}{}
		}
		ts.deniedAnswer[db.Canonical(n)] = struct{}{}
	}
	if c.changed || len(ts.force) > 0 || len(ts.forceWatches) > 0 {
		ts.markRequested()
	}
	s.mu.Unlock()
	for _, w := range dropped {
		s.srv.db.Unsubscribe(s.sub, *w)
	}
}
