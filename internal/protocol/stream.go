package protocol

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// Client features that say a SotW client takes resources wrapped in
// envoy.service.discovery.v3.Resource (docs/protocol.md §1.10): Envoy's name and
// the one gRPC sends.
var wrapFeatures = []string{"xds.config.supports-resource-in-sotw", "xds.config.resource-in-sotw"}

// ttlFeature says a client honours Resource.ttl and heartbeats. xdsd sends
// TTLs over delta only: a SotW heartbeat of a full-state type would read as
// a state without the resources it renews.
const ttlFeature = "xds.config.supports-resource-ttl"

// stream is one downstream xDS stream.
type stream struct {
	srv       *Server
	ss        grpc.ServerStream
	cancel    context.CancelFunc
	raw       rawRequest // the SotW request buffer, reused (fastack.go)
	delta     bool
	fixedType string // a per-type service's type; "" for ADS
	id        uint64
	addr      string
	started   time.Time

	sub  *db.Subscriber
	wake chan struct{}

	mu         sync.Mutex
	node       *corev3.Node
	nodeParams constraint.Params
	wrap       bool        // SotW client takes wrapped resources
	ttl        bool        // delta client supports TTLs and heartbeats (§2.7)
	rechecks   atomic.Bool // a SotW full state has waited for its source (PendingWait)
	outs       []out       // collect's result, reused (guarded by mu)
	types      map[string]*typeState
	nonces     uint64
	watchCount int
	declared   int // initial_resource_versions entries taken, all types
	nackLog    logLimit
	requests   int
	limiter    limiter
	// ended: the stream has unsubscribed everything (it is over), so a
	// request its receiving side still reads must not subscribe again.
	ended bool
}

func (s *stream) kind() string {
	k := "sotw"
	if s.delta {
		k = "delta"
	}
	if s.fixedType == "" {
		return "ads-" + k
	}
	return k
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run serves the stream until it ends: requests are read and applied on a
// second goroutine, responses computed and sent on this one, so neither a
// slow client nor a burst of changes ever blocks the other direction.
func (s *stream) run(ctx context.Context) error {
	recvErr := make(chan error, 1)
	go func() { recvErr <- s.recvLoop(ctx) }()
	// hb fires when TTL heartbeats are due (docs/protocol.md §2.7), or when a
	// SotW full state has waited for the source long enough (PendingWait).
	hb := time.NewTimer(time.Hour)
	hb.Stop()
	defer hb.Stop()
	for {
		select {
		case <-s.wake:
		case <-hb.C:
			s.timerDue(time.Now())
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				return err
			}
			// The client half-closed: it sends no more requests, but
			// gRPC lets the server go on sending, and what it subscribed
			// to may still change. Serve it until it goes away.
			recvErr = nil
		case <-ctx.Done():
			return ctx.Err()
		}
		for {
			out := s.collect()
			if len(out) == 0 {
				break
			}
			for i := range out {
				if err := s.ss.SendMsg(&out[i].enc); err != nil {
					return err
				}
				s.srv.metrics.sent(&out[i])
			}
		}
		if next, ok := s.nextTimer(); ok {
			hb.Reset(time.Until(next))
		}
	}
}

func (s *stream) recvLoop(ctx context.Context) error {
	for {
		var err error
		if s.delta {
			if err = s.ss.RecvMsg(&s.raw); err == nil {
				if err = s.limiter.wait(ctx); err == nil {
					if t, n, ok := readPlainDeltaAck(s.raw.b); !ok || !s.handlePlainDeltaAck(t, n) {
						req := &discoveryv3.DeltaDiscoveryRequest{}
						if err = proto.Unmarshal(s.raw.b, req); err != nil {
							err = status.Errorf(codes.InvalidArgument, "bad DeltaDiscoveryRequest: %v", err)
						} else {
							err = s.handleDelta(req)
						}
					}
				}
			}
		} else if err = s.ss.RecvMsg(&s.raw); err == nil {
			if err = s.limiter.wait(ctx); err == nil {
				if a, ok := readPlainAck(s.raw.b); !ok || !s.handlePlainAck(a) {
					req := &discoveryv3.DiscoveryRequest{}
					if err = proto.Unmarshal(s.raw.b, req); err != nil {
						err = status.Errorf(codes.InvalidArgument, "bad DiscoveryRequest: %v", err)
					} else {
						err = s.handleSotW(req)
					}
				}
			}
		}
		if err != nil {
			return err
		}
		if s.due() {
			s.signal()
		}
	}
}

// due reports whether a request left responses to compute, so that an ACK
// does not wake the sender for nothing.
func (s *stream) due() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.types {
		if ts.busy() {
			return true
		}
	}
	return false
}

// requestType checks the type URL of a request against the service.
func (s *stream) requestType(typeURL string) (string, error) {
	if s.fixedType != "" {
		if typeURL == "" {
			return s.fixedType, nil
		}
		if typeURL != s.fixedType {
			return "", status.Errorf(codes.InvalidArgument, "type_url %q on the %s service", typeURL, resource.ForURL(s.fixedType).Name)
		}
	}
	if typeURL == "" {
		return "", status.Error(codes.InvalidArgument, "type_url is empty")
	}
	return typeURL, nil
}

// setNode takes the node from the first request that carries one. Its
// string metadata fields stand in for dynamic parameters on subscriptions
// that carry none (docs/architecture.md §4.5, TP2 "Migrating From Node Metadata").
func (s *stream) setNode(n *corev3.Node) {
	if n == nil || s.node != nil {
		return
	}
	s.node = n
	s.nodeParams = NodeParams(n)
	s.srv.log.Info("client connected", "stream", s.id, "node", truncate(n.GetId(), maxLoggedText), "address", s.addr,
		"kind", s.kind(), "params", paramsAttr(s.nodeParams))
	for _, f := range n.GetClientFeatures() {
		for _, w := range wrapFeatures {
			if f == w && !s.delta {
				// Wrapping (with constraints) is a SotW matter: a delta
				// client gets constraints only by locator (docs/architecture.md §4.5).
				s.wrap = true
			}
		}
		if f == ttlFeature && s.delta {
			s.ttl = true
		}
	}
}

// NodeParams are the dynamic parameters an unmodified client is taken to
// send: the string fields of its node metadata.
func NodeParams(n *corev3.Node) constraint.Params {
	p := constraint.Params{}
	for k, v := range n.GetMetadata().GetFields() {
		if sv, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			p[k] = sv.StringValue
		}
	}
	return p
}

func (s *stream) typeState(typeURL string) *typeState {
	ts := s.types[typeURL]
	if ts == nil {
		ts = newTypeState(resource.ForURL(typeURL))
		s.types[typeURL] = ts
	}
	return ts
}

// addWatch subscribes; the caller commits the type state's watches when
// its request is done.
func (s *stream) addWatch(ts *typeState, w *db.Sub) (bool, error) {
	k := w.Key
	if _, ok := ts.watches()[k]; ok {
		return false, nil
	}
	if s.watchCount >= s.srv.opts.MaxSubscriptions {
		return false, status.Errorf(codes.ResourceExhausted, "more than %d subscriptions on one stream", s.srv.opts.MaxSubscriptions)
	}
	ts.editing()[k] = w
	s.watchCount++
	if s.srv.opts.HonorDoNotCache {
		if ts.dncSince == nil {
			ts.dncSince = map[db.Key]int64{}
		}
		ts.dncSince[k] = s.srv.db.Rev()
	}
	s.srv.db.Subscribe(s.sub, *w)
	return true, nil
}

func (s *stream) dropWatch(ts *typeState, k db.Key) {
	w, ok := ts.watches()[k]
	if !ok {
		return
	}
	delete(ts.editing(), k)
	delete(ts.dncSince, k)
	s.watchCount--
	s.srv.db.Unsubscribe(s.sub, *w)
}

// unsubscribeAll ends every subscription of the stream (it is gone).
func (s *stream) unsubscribeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for _, ts := range s.types {
		for _, w := range ts.watches() {
			s.srv.db.Unsubscribe(s.sub, *w)
		}
	}
}

// newWatch makes a subscription of the stream: by TP2 locator, with the
// locator's parameters; or plainly, with the node metadata's in their
// place (docs/architecture.md §4.5, TP2 "Migrating From Node Metadata").
func (s *stream) newWatch(ts *typeState, n string, locator map[string]string, byLocator bool) *db.Sub {
	p := s.nodeParams
	if byLocator {
		p = constraint.Params(locator)
	}
	w := db.NewSub(ts.typ.URL, n, p)
	w.Locator = byLocator
	return &w
}

// begin starts on a request (s.mu held): the type's state, made if new
// (existed says whether it was there before), with the node noted.
func (s *stream) begin(typeURL string, n *corev3.Node) (ts *typeState, existed bool, err error) {
	if s.ended {
		return nil, false, status.Error(codes.Canceled, "stream ended")
	}
	if typeURL, err = s.requestType(typeURL); err != nil {
		return nil, false, err
	}
	s.setNode(n)
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
	defer s.mu.Unlock()
	ts, _, err := s.begin(req.GetTypeUrl(), req.GetNode())
	if err != nil {
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
			return nil
		}
		s.ackOrNack(ts, n, ts.sentVersion, req.GetVersionInfo(), req.GetErrorDetail().GetMessage(), req.GetErrorDetail() != nil, now)
	}

	// Most requests are ACKs repeating the previous list: nothing changes.
	if ts.sameRequest(req) {
		return nil
	}
	// §1.5: the name list replaces the previous one; "*" is an explicit
	// wildcard, and an empty list is a wildcard only until the client has
	// named something (and only for the types with wildcard semantics).
	next := map[db.Key]*db.Sub{}
	for _, n := range req.GetResourceNames() {
		w := s.newWatch(ts, n, nil, false)
		next[w.Key] = w
	}
	for _, l := range req.GetResourceLocators() {
		w := s.newWatch(ts, l.GetName(), l.GetDynamicParameters(), true)
		next[w.Key] = w
	}
	if len(next) > 0 {
		ts.everNamed = true
	} else if !ts.everNamed && ts.typ.FullState {
		w := s.newWatch(ts, db.Wildcard, nil, false)
		next[w.Key] = w
	}
	changed := false
	defer ts.commit(&s.srv.sets)
	for k := range ts.watches() {
		if _, ok := next[k]; !ok {
			s.dropWatch(ts, k)
			changed = true
		}
	}
	for _, w := range next {
		added, err := s.addWatch(ts, w)
		if err != nil {
			return err
		}
		if added {
			changed = true
			// §1.6: a newly added name is sent even if it was sent before.
			ts.forceWatch(w)
		}
	}
	if changed {
		ts.markRequested()
		if ts.typ.FullState {
			ts.mustReply = true
		}
	}
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

// logLimit lets one line through per logEvery for a stream's repeated
// event, counting what it held back, so that no client can flood the log.
type logLimit struct {
	last       time.Time
	suppressed int
}

const logEvery = time.Second

// allow reports whether to log now, and how many were held back since the
// last line logged.
func (l *logLimit) allow(now time.Time) (int, bool) {
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}

// maxLoggedText bounds client-supplied text (NACK details) in logs and
// statuses, so that a client cannot flood them.
const maxLoggedText = 1024

// truncate cuts s to at most n bytes, on a rune boundary, saying how much
// was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

// declare records what a reconnecting delta client says it holds (§2.9).
// A declared version of a name the request subscribes by locator is
// resolved to the variant it is (a variant's version names it), so that
// its replacement goes out with its deletion by resource_name, in one
// response (TP2); a version no current variant has is held as a version
// alone.
func (s *stream) declare(ts *typeState, req *discoveryv3.DeltaDiscoveryRequest) error {
	declared := req.GetInitialResourceVersions()
	if len(declared) == 0 {
		return nil
	}
	// What a client declares is state the stream keeps, like its
	// subscriptions: it counts against the same bound.
	if s.declared+len(declared) > s.srv.opts.MaxSubscriptions {
		return status.Errorf(codes.ResourceExhausted, "initial_resource_versions: more than %d resources declared on one stream",
			s.srv.opts.MaxSubscriptions)
	}
	s.declared += len(declared)
	byLocator := map[string]bool{}
	for _, l := range req.GetResourceLocatorsSubscribe() {
		byLocator[db.Canonical(l.GetName())] = true
	}
	s.srv.db.Read(func(r *db.Reader) {
		for n, v := range declared {
			n = db.Canonical(n)
			hv := heldVariant{version: v}
			if byLocator[n] {
				for _, cand := range r.Variants(ts.typ.URL, n) {
					if cand.Version == v && !cand.Constraints.IsZero() {
						hv = heldVariant{ckey: cand.Constraints.Key(), version: v, v: cand, tp2: true}
						break
					}
				}
			}
			ts.setHeld(n, &held{variants: []heldVariant{hv}})
		}
	})
	return nil
}

// handleDelta applies a delta request (docs/protocol.md §2).
func (s *stream) handleDelta(req *discoveryv3.DeltaDiscoveryRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, existed, err := s.begin(req.GetTypeUrl(), req.GetNode())
	if err != nil {
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
	first := !existed
	if first {
		// §2.9: a reconnecting client lists what it holds; nothing it
		// already has is sent again (§6.6).
		if err := s.declare(ts, req); err != nil {
			return err
		}
	}
	changed := false
	defer ts.commit(&s.srv.sets)
	subscribe := func(n string, loc map[string]string, tp2 bool) error {
		w := s.newWatch(ts, n, loc, tp2)
		added, err := s.addWatch(ts, w)
		if err != nil {
			return err
		}
		changed = changed || added
		// §2.2: every subscribed name is answered, even when the server
		// believes the client is current, except what the client declared
		// in initial_resource_versions on this same request.
		if declared := ts.held.get(w.Name) != nil; !(first && declared) && w.Name != db.Wildcard {
			ts.forceWatch(w)
		}
		if w.Name == db.Wildcard {
			ts.mustReply = true
		}
		return nil
	}
	for _, n := range req.GetResourceNamesSubscribe() {
		if err := subscribe(n, nil, false); err != nil {
			return err
		}
	}
	for _, l := range req.GetResourceLocatorsSubscribe() {
		if err := subscribe(l.GetName(), l.GetDynamicParameters(), true); err != nil {
			return err
		}
	}
	// §2.4: an implicit wildcard is a first request with both lists empty;
	// unlike SotW it survives later named subscriptions.
	if first && len(req.GetResourceNamesSubscribe())+len(req.GetResourceLocatorsSubscribe()) == 0 {
		if err := subscribe(db.Wildcard, nil, false); err != nil {
			return err
		}
	}
	unsubscribe := func(n string, loc map[string]string, tp2 bool) {
		w := s.newWatch(ts, n, loc, tp2)
		k := w.Key
		if _, ok := ts.watches()[k]; !ok && ts.typ.URL == resource.VirtualHostURL {
			// §2.8: a client may unsubscribe a virtual host by its name
			// rather than the alias it subscribed with.
			var drop []db.Key
			s.srv.db.Read(func(r *db.Reader) {
				for wk, wt := range ts.watches() {
					if v := r.ResolveVirtualHost(wt.Name, wt.Params); v != nil && v.Name == w.Name {
						drop = append(drop, wk)
					}
				}
			})
			for _, wk := range drop {
				s.dropWatch(ts, wk)
				changed = true
			}
			return
		}
		if _, ok := ts.watches()[k]; !ok {
			return // §2.3: unsubscribing an unknown name is ignored
		}
		s.dropWatch(ts, k)
		changed = true
		if w.Name != db.Wildcard && !subscribedByName(ts, w.Name) {
			// §2.3: a name still covered (by a wildcard or a glob) must be
			// sent again; otherwise the client has dropped it. Still
			// subscribed by name (other parameters, or plainly rather than
			// by locator), the client keeps what it holds under that.
			ts.forceName(w.Name)
		}
	}
	for _, n := range req.GetResourceNamesUnsubscribe() {
		unsubscribe(n, nil, false)
	}
	for _, l := range req.GetResourceLocatorsUnsubscribe() {
		unsubscribe(l.GetName(), l.GetDynamicParameters(), true)
	}
	if changed || len(ts.force) > 0 || len(ts.forceWatches) > 0 {
		ts.markRequested()
	}
	return nil
}

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
		if ts := s.types[c.Type]; ts != nil {
			ts.markDirty(c.Name, since)
		}
	}
	var buf [4]*typeState
	busy := buf[:0]
	beats := false
	for _, ts := range s.types {
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
			if s.ttl && ts.hbEvery == 0 && r.HasTTL(ts.typ.URL) {
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
			earlier(ts.pendingSince.Add(s.srv.opts.PendingWait))
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
		if ts.recheck && !ts.pendingSince.IsZero() && !now.Before(ts.pendingSince.Add(s.srv.opts.PendingWait)) {
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
	nonce := strconv.FormatUint(s.nonces, 10)
	field := protoNonce(s.delta)
	enc := Encoded{Body: r.encoded(s.srv.cache), Nonce: nonceField(field, nonce)}
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
		ts.recent = append(ts.recent, sent{nonce, r.version})
		if len(ts.recent) > 16 {
			ts.recent = ts.recent[len(ts.recent)-16:]
		}
	}
	return out{typ: ts.typ, counters: ts.counters(s.srv.metrics), enc: enc, items: len(r.items) + len(r.removed) + len(r.removedNames), since: ts.since}
}

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
// is (leaving it out would delete it there) — or, for Options.PendingWait,
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
	if now.Sub(ts.pendingSince) >= s.srv.opts.PendingWait {
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
	w := ts.desire(r, only, true, s.wrap, s.ttl, s.srv.opts.HonorDoNotCache)
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
	ts.force, ts.forceWatches = nil, nil
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
	w := ts.desire(r, only, false, false, s.ttl && ts.typ.URL != resource.VirtualHostURL, s.srv.opts.HonorDoNotCache)
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
			if h.absent || !stillCovered(r, ts, n) {
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
func removeHeld(r *response, n string, h *held) {
	if h != nil {
		for _, hv := range h.variants {
			if hv.tp2 && hv.v != nil && !hv.v.Constraints.IsZero() {
				r.removedNames = append(r.removedNames, removal{name: n, cons: hv.v.Constraints.Proto(), ckey: hv.ckey})
				continue
			}
			r.removed = appendNew(r.removed, n)
		}
	}
	if h == nil || len(h.variants) == 0 {
		r.removed = appendNew(r.removed, n)
	}
}

// subscribedByName reports whether a watch of ts names n itself.
func subscribedByName(ts *typeState, n string) bool {
	for k := range ts.watches() {
		if k.Name == n {
			return true
		}
	}
	return false
}

// stillCovered reports whether some watch of ts still covers n, so that
// its disappearance is a deletion rather than an unsubscription. A virtual
// host the client knows counts as deleted only when it is gone from the db:
// an alias that now resolves elsewhere leaves it with the client.
func stillCovered(r *db.Reader, ts *typeState, n string) bool {
	if ts.typ.URL == resource.VirtualHostURL {
		return len(r.Variants(ts.typ.URL, n)) == 0
	}
	g, inGlob := db.InGlob(n)
	for k := range ts.ws.m {
		if k.Name == n || k.Name == db.Wildcard || (inGlob && k.Name == g) {
			return true
		}
	}
	return false
}

func (s *stream) String() string {
	return fmt.Sprintf("stream %d (%s, node %q, %s)", s.id, s.kind(), s.node.GetId(), s.addr)
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// paramsAttr shows node parameters in a log line, bounded in size.
func paramsAttr(p map[string]string) string {
	keys := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + p[k])
	}
	return truncate(b.String(), maxLoggedText)
}
