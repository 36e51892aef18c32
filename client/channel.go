package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// subKey is one upstream subscription: a name under one parameter set.
type subKey struct{ name, pkey string }

// upSub is one upstream subscription of a channel.
type upSub struct {
	name   string
	params constraint.Params
	pkey   string
	tp2    bool // sent as a TP2 resource locator
}

// upType is a channel's state for one resource type.
type upType struct {
	url  string
	subs map[subKey]*upSub

	// On the current stream: whether the type was requested yet, and (delta)
	// the subscription changes not yet sent.
	requested      bool
	toSub, toUnsub map[subKey]*upSub
	// bounce (SotW) holds subscriptions to fetch again: a request without
	// them, then one with them, makes the server send them anew.
	bounce    map[subKey]bool
	forceSend bool
	// sent tracks this stream's SotW requests, for full-state responses.
	sent sentRequests

	// SotW: the last accepted version and the last received nonce (§1.1,
	// §1.4: kept across reconnects); delta: the nonce to acknowledge.
	version string
	nonce   string
	ack     *pendingAck
	// nacks (delta): NACKs a later response overtook before they were
	// sent; each goes in a request of its own, in order, before ack (§2.1:
	// a response is acknowledged by its own nonce).
	nacks []*pendingAck

	// held is what this channel provided to the db, by name: constraint
	// key → version; it is what a reconnecting delta stream declares in
	// initial_resource_versions, and what a SotW full-state response can
	// delete.
	held map[string]map[string]string
	// declare: the held versions came from the server now streaming.
	declare bool
	// refresh: names a stream must answer anew, so a reconnecting one does
	// not declare them held (counted: an #alt= watcher on its fallback
	// waits for the primary's word, docs/protocol.md §2.9); fresh: those the
	// current stream has answered for (its server has said what they are,
	// or that they do not exist).
	fresh   map[string]bool
	refresh map[string]int

	// ttl: the TTL timer of each held variant that has one, by name and
	// constraint key (docs/protocol.md §2.7): it runs across outages, which is
	// the point, and is renewed by a heartbeat or a new copy.
	ttl map[[2]string]*ttlTimer
	// lingering: held names nothing subscribes to any more, whose cache
	// entries the client keeps while no healthy stream is up (Client
	// lingering). They keep their TTLs, are not declared to a reconnecting
	// stream, and are let go of once a stream is healthy (markHealthy).
	lingering map[string]bool
}

// sentRequests tracks which subscriptions a stream's SotW requests of one
// type named, so that a full-state response deletes only what the request
// it answers named (docs/protocol.md §1.7). The server answers the latest
// request it has (§1.8), but a response may cross newer requests on the
// wire: it answers one of the requests from floor to n, the ones sent
// before it arrived. A response holding a name answers a request naming
// it, which raises floor.
type sentRequests struct {
	n     int            // requests sent
	floor int            // the earliest request the latest response may answer
	since map[subKey]int // what the latest request names → the request it has been named since
	left  []span         // what requests from floor on named, and the latest does not
}

// span: requests from..to-1 named k.
type span struct {
	k        subKey
	from, to int
}

// record notes a request naming keys.
func (r *sentRequests) record(keys map[subKey]bool) {
	r.n++
	if r.since == nil {
		r.since = map[subKey]int{}
	}
	for k, from := range r.since {
		if !keys[k] {
			r.left = append(r.left, span{k, from, r.n})
			delete(r.since, k)
		}
	}
	for k := range keys {
		if _, ok := r.since[k]; !ok {
			r.since[k] = r.n
		}
	}
}

// answered narrows the requests a response may answer by the resources
// it holds: each was named by the request answered (or the wildcard was),
// so that request is no earlier than the first one from floor naming it.
func (r *sentRequests) answered(puts []*resource.Variant) {
	r.floor = max(r.floor, 1)
	earliest := map[string]int{}
	note := func(name string, from int) {
		from = max(from, r.floor)
		if e, ok := earliest[name]; !ok || from < e {
			earliest[name] = from
		}
	}
	for k, from := range r.since {
		note(k.name, from)
	}
	for _, s := range r.left {
		if s.to > r.floor {
			note(s.k.name, s.from)
		}
	}
	wild, wildOK := earliest[db.Wildcard]
	floor := r.floor
	for _, v := range puts {
		e, ok := earliest[v.Name]
		if wildOK && (!ok || wild < e) {
			e, ok = wild, true
		}
		if ok {
			// (A name no request from floor on named was sent unasked.)
			floor = max(floor, e)
		}
	}
	r.floor = floor
	// A name the response holds that requests from floor on left out and
	// named again (a refetch, an unsubscribe and subscribe) is taken as
	// named throughout: were the response an answer to a request from
	// before the gap, it crossed the requests of the gap, which a server
	// then ignores for their stale nonce (§1.8), so no answer to them
	// comes. Otherwise nothing would prove again that the name is named.
	present := make(map[string]bool, len(puts))
	for _, v := range puts {
		present[v.Name] = true
	}
	keep := r.left[:0]
	for _, s := range r.left {
		if from, ok := r.since[s.k]; ok && present[s.k.name] {
			r.since[s.k] = min(from, s.from)
			continue
		}
		if s.to > r.floor {
			keep = append(keep, s)
		}
	}
	r.left = keep
}

// named reports whether every request the latest response may answer
// named k.
func (r *sentRequests) named(k subKey) bool {
	from, ok := r.since[k]
	return ok && r.floor > 0 && from <= r.floor
}

// pendingAck is the acknowledgement a response is due: an ACK, or a NACK
// (err set) with the rejections it reports.
type pendingAck struct {
	version, nonce string
	err            string
	rejected       []rejection
}

// rejection is one reason a response was NACKed: a rejected resource's
// name ("" when it could not be told) and the reason.
type rejection struct{ name, msg string }

// nack makes a NACK of rejections, with the version last accepted (§1.3).
func nack(version, nonce string, rs []rejection) *pendingAck {
	msgs := make([]string, len(rs))
	for i, r := range rs {
		msgs[i] = r.msg
	}
	return &pendingAck{version: version, nonce: nonce, err: strings.Join(msgs, "; "), rejected: rs}
}

// channel is one ADS stream to one of an authority's servers (in order,
// falling back to the next when one fails and returning to the first when
// it is back).
type channel struct {
	c       *Client
	key     string
	servers []ServerConfig
	conns   []*grpc.ClientConn

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	types     map[string]*upType
	connected int // index of the server with a stream open, -1 when none
	gen       int // counts streams, so a late word from an old one is told apart
	// healthy: the open stream has proved itself — a response came, or it
	// stayed open for streamProven. Only a healthy stream resets backoff
	// (a server may accept a stream and fail it at once, for ever).
	healthy bool
	// versionsFrom is the server the held versions came from. Versions mean
	// something only to the server that made them (they are its store's
	// revisions), so they are declared on reconnection only to it.
	versionsFrom int
	lastErr      error
	downSince    time.Time // when the last healthy stream ended (or the channel was made)
	retry        []retryState
	received     int64 // resources received, for tests and metrics
	responses    int64
	nackCount    int64
	switchBack   chan struct{} // closed to end a fallback session when the primary is back
}

// retryState is one server's backoff: failures in a row (streams that
// ended, or never started, before proving healthy) and when it may be
// tried again.
type retryState struct {
	fails  int
	at     time.Time
	logged string // the failure last logged, so a server failing the same way is logged once
}

// streamProven is how long a stream must stay open without a response to
// count as healthy: a SotW server may have nothing to send.
const streamProven = time.Second

func newChannel(c *Client, key string, servers []ServerConfig) (*channel, error) {
	ch := &channel{c: c, key: key, servers: servers, wake: make(chan struct{}, 1), done: make(chan struct{}),
		types: map[string]*upType{}, connected: -1, versionsFrom: -1, downSince: time.Now(), retry: make([]retryState, len(servers))}
	for _, s := range servers {
		creds, err := s.TransportCredentials()
		if err != nil {
			ch.closeConns()
			return nil, err
		}
		// Reconnect as this client's options say, not gRPC's default (1s
		// growing to 2 minutes), so a returning server is found in time.
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 20 * time.Second, Backoff: backoff.Config{
				BaseDelay: c.o.BackoffBase, Multiplier: 1.6, Jitter: 0.2, MaxDelay: c.o.BackoffMax}}),
		}, c.o.DialOptions...)
		conn, err := grpc.NewClient(s.URI, opts...)
		if err != nil {
			ch.closeConns()
			return nil, fmt.Errorf("server %s: %w", s.URI, err)
		}
		ch.conns = append(ch.conns, conn)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch.cancel = cancel
	go ch.run(ctx)
	return ch, nil
}

func (ch *channel) closeConns() {
	for _, c := range ch.conns {
		c.Close()
	}
}

func (ch *channel) close() {
	ch.cancel()
	<-ch.done
	ch.closeConns()
	ch.mu.Lock()
	ch.connected = -1
	for _, t := range ch.types {
		for _, tm := range t.ttl {
			tm.Stop()
		}
		t.ttl = nil
	}
	ch.mu.Unlock()
}

func (ch *channel) signal() {
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

func (ch *channel) typ(url string) *upType {
	t := ch.types[url]
	if t == nil {
		t = &upType{url: url, subs: map[subKey]*upSub{}, held: map[string]map[string]string{}}
		ch.types[url] = t
	}
	return t
}

// subscribe adds an upstream subscription (from a db interest).
func (ch *channel) subscribe(typeURL string, s *upSub) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.typ(typeURL)
	k := subKey{s.name, s.pkey}
	if _, ok := t.subs[k]; ok {
		return
	}
	t.subs[k] = s
	if _, again := t.toUnsub[k]; again {
		delete(t.toUnsub, k)
		// Unsubscribed and subscribed again before a request went out: the
		// cache let go of its copy, but over SotW the next request names
		// what the last one did, so the server would send nothing (it sends
		// newly added names, §1.6). Leave the name out of one request and
		// put it back. (Delta sends the subscription again, which a server
		// must answer, §2.2.)
		ch.bounceLocked(t, k)
	}
	if t.toSub == nil {
		t.toSub = map[subKey]*upSub{}
	}
	t.toSub[k] = s
	if len(t.lingering) > 0 {
		wants := t.wanted()
		for n := range t.lingering {
			if wants(n) {
				delete(t.lingering, n) // subscribed again: held as any other
			}
		}
	}
	ch.signal()
}

// bounceLocked makes a SotW stream fetch a subscription again: the next
// request leaves it out and the one after puts it back. Nothing is needed
// before the type's first request on the stream, which names everything.
// ch.mu is held.
func (ch *channel) bounceLocked(t *upType, k subKey) {
	if ch.connected < 0 || ch.servers[ch.connected].Delta() || !t.requested {
		return
	}
	if t.bounce == nil {
		t.bounce = map[subKey]bool{}
	}
	t.bounce[k] = true
}

// lookup finds an upstream subscription (s is nil if there is none);
// ch.mu is held.
func (ch *channel) lookup(typeURL, name, pkey string) (t *upType, k subKey, s *upSub) {
	k = subKey{name, pkey}
	if t = ch.types[typeURL]; t != nil {
		s = t.subs[k]
	}
	return t, k, s
}

// unsubscribe removes an upstream subscription. What no remaining
// subscription covers is no longer held — for a glob or the wildcard, its
// members too — so that a reconnecting stream does not declare versions of
// what the cache evicted (docs/protocol.md §2.9), and the client forgets what it
// knew of them. While no healthy stream is up the client keeps their cache
// entries instead (Client.interest): they linger, held with their TTLs.
// It reports whether they do.
func (ch *channel) unsubscribe(typeURL string, name, pkey string) (lingers bool) {
	ch.mu.Lock()
	linger := ch.connected < 0 || !ch.healthy
	t, k, s := ch.lookup(typeURL, name, pkey)
	if s == nil {
		ch.mu.Unlock()
		return linger
	}
	delete(t.subs, k)
	delete(t.toSub, k)
	if t.toUnsub == nil {
		t.toUnsub = map[subKey]*upSub{}
	}
	t.toUnsub[k] = s
	wants := t.wanted()
	drop := func(n string) {
		if !linger {
			delete(t.held, n)
			return
		}
		if t.lingering == nil {
			t.lingering = map[string]bool{}
		}
		t.lingering[n] = true
	}
	collection := isCollection(name)
	if collection {
		for n := range t.held {
			if !wants(n) {
				drop(n)
			}
		}
	} else if !wants(name) && t.held[name] != nil {
		drop(name)
	}
	t.stopUnheldTTLs()
	ch.signal()
	ch.mu.Unlock()
	if collection && !wants(name) {
		ch.c.forgetMembers(ch, typeURL, name)
	}
	return linger
}

// stopUnheldTTLs stops the TTL timers of variants no longer held. ch.mu is
// held.
func (t *upType) stopUnheldTTLs() {
	for k, tm := range t.ttl {
		if _, ok := t.held[k[0]][k[1]]; !ok {
			tm.Stop()
			delete(t.ttl, k)
		}
	}
}

// forget drops what the channel holds of resources the cache evicted (a
// VHDS name's virtual host, a collection's members) and nothing it
// subscribes covers: their versions, which a reconnecting stream would
// declare, and their TTL timers.
func (ch *channel) forget(typeURL string, names []string) {
	if len(names) == 0 {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.types[typeURL]
	if t == nil {
		return
	}
	wants := t.wanted()
	for _, n := range names {
		if !wants(n) {
			delete(t.held, n)
			delete(t.lingering, n)
		}
	}
	t.stopUnheldTTLs()
}

// forgetLingering lets go of what lingered through an outage and was not
// subscribed again, now that a healthy stream is up: the client evicts it
// from the cache (Client.healthy). ch.mu is held.
func (ch *channel) forgetLingering() {
	for _, t := range ch.types {
		if len(t.lingering) == 0 {
			continue
		}
		wants := t.wanted()
		for n := range t.lingering {
			if !wants(n) {
				delete(t.held, n)
			}
		}
		t.lingering = nil
		t.stopUnheldTTLs()
	}
}

// isCollection reports whether a subscription is to many resources: the
// wildcard or a glob.
func isCollection(n string) bool {
	return n == db.Wildcard || db.IsGlob(n)
}

// wanted returns whether a name is still subscribed: by name, by the
// wildcard, or by a glob it is an immediate child of. ch.mu is held.
func (t *upType) wanted() func(n string) bool {
	names := make(map[string]bool, len(t.subs))
	for k := range t.subs {
		names[k.name] = true
	}
	return func(n string) bool {
		if names[n] || names[db.Wildcard] {
			return true
		}
		g, ok := db.InGlob(n)
		return ok && names[g]
	}
}

// refetch asks the server to send a subscribed resource again (a relay
// may not answer a new downstream from a do_not_cache copy). Delta: the
// subscription is sent again, which a server must answer (docs/protocol.md
// §2.2). SotW: the name is left out of one request and put back.
func (ch *channel) refetch(typeURL, name, pkey string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t, k, s := ch.lookup(typeURL, name, pkey)
	if s == nil {
		return
	}
	if ch.connected >= 0 && !ch.servers[ch.connected].Delta() {
		ch.bounceLocked(t, k)
	} else {
		if t.toSub == nil {
			t.toSub = map[subKey]*upSub{}
		}
		t.toSub[k] = s
	}
	ch.signal()
}

// isConnected reports whether a stream is up.
func (ch *channel) isConnected() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.connected >= 0
}

// isHealthy reports whether the channel's stream has proved itself.
func (ch *channel) isHealthy() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.connected >= 0 && ch.healthy
}

// run keeps a stream up: it tries the servers in order of preference,
// skipping those backing off; a server whose stream fails before proving
// healthy backs off exponentially, with jitter, and the next one is tried
// meanwhile; while on a fallback server it watches for the first to come
// back. (grpc-go's xDS client resets backoff on the first response too.)
func (ch *channel) run(ctx context.Context) {
	defer close(ch.done)
	for ctx.Err() == nil {
		i, wait := ch.next()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		healthy, err := ch.session(ctx, i)
		if ctx.Err() != nil {
			return
		}
		ch.ended(i, healthy, err)
	}
}

// next picks the server to try: the first not backing off, or (wait > 0)
// how long until one is.
func (ch *channel) next() (i int, wait time.Duration) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	now := time.Now()
	wait = -1
	for i, r := range ch.retry {
		d := r.at.Sub(now)
		if d <= 0 {
			return i, 0
		}
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return 0, wait
}

// backoff is how long a server that failed n times in a row waits:
// exponential from BackoffBase up to BackoffMax, with ±20% jitter.
func (ch *channel) backoff(n int) time.Duration {
	d := float64(ch.c.o.BackoffBase)
	for range n - 1 {
		d *= 1.6
		if d >= float64(ch.c.o.BackoffMax) {
			d = float64(ch.c.o.BackoffMax)
			break
		}
	}
	return time.Duration(d * (0.8 + 0.4*rand.Float64()))
}

// ended records how a session with server i ended: a healthy one may be
// resumed at once, a failed one backs off. It logs the failure, once per
// kind of failure of a server, and every loss of a healthy stream.
func (ch *channel) ended(i int, healthy bool, err error) {
	now := time.Now()
	ch.mu.Lock()
	was := ch.connected
	ch.connected, ch.healthy = -1, false
	if err != nil {
		ch.lastErr = err
	}
	r := &ch.retry[i]
	var log string
	if healthy {
		r.fails, r.at, r.logged = 0, time.Time{}, ""
		ch.downSince = now
		if err != nil {
			log = "lost"
		}
	} else {
		r.fails++
		r.at = now.Add(ch.backoff(r.fails))
		if msg := fmt.Sprint(err); msg != r.logged {
			r.logged, log = msg, "failed"
		}
	}
	retryIn := time.Until(r.at).Round(time.Millisecond)
	ch.mu.Unlock()
	switch log {
	case "lost":
		ch.c.o.Logger.Warn("xDS stream lost", "server", ch.servers[i].URI, "error", err)
	case "failed":
		ch.c.o.Logger.Warn("xDS server unusable", "server", ch.servers[i].URI, "error", err, "retry_in", retryIn)
	}
	if was >= 0 {
		ch.c.channelState(ch, false)
	}
}

// markHealthy records that the open stream to server i has proved itself.
func (ch *channel) markHealthy(i int) {
	ch.mu.Lock()
	if ch.connected != i || ch.healthy {
		ch.mu.Unlock()
		return
	}
	ch.healthy = true
	ch.retry[i] = retryState{}
	ch.forgetLingering()
	ch.mu.Unlock()
	ch.c.o.Logger.Info("xDS stream up", "server", ch.servers[i].URI)
	ch.c.healthy(ch)
}

// stream is what session needs of a SotW or delta ADS stream.
type adsStream interface {
	send(req proto.Message) error
	recv() (proto.Message, error)
}

type sotwStream struct {
	s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func (s sotwStream) send(m proto.Message) error { return s.s.Send(m.(*discoveryv3.DiscoveryRequest)) }
func (s sotwStream) recv() (proto.Message, error) {
	return s.s.Recv()
}

type deltaStream struct {
	s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func (s deltaStream) send(m proto.Message) error {
	return s.s.Send(m.(*discoveryv3.DeltaDiscoveryRequest))
}
func (s deltaStream) recv() (proto.Message, error) { return s.s.Recv() }

// session runs one stream to server i until it fails. healthy reports
// whether the stream proved itself before it ended (so backoff can reset).
func (ch *channel) session(ctx context.Context, i int) (healthy bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := ch.servers[i]
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(ch.conns[i])
	var st adsStream
	if srv.Delta() {
		s, err := client.DeltaAggregatedResources(sctx)
		if err != nil {
			return false, fmt.Errorf("%s: %w", srv.URI, err)
		}
		st = deltaStream{s}
	} else {
		s, err := client.StreamAggregatedResources(sctx)
		if err != nil {
			return false, fmt.Errorf("%s: %w", srv.URI, err)
		}
		st = sotwStream{s}
	}
	// Stream creation succeeds before the server answers: the stream is
	// open (does-not-exist timers run), but healthy only once it answers
	// or stays open for streamProven.
	ch.mu.Lock()
	ch.connected, ch.healthy = i, false
	ch.gen++
	sameServer := ch.versionsFrom == i
	ch.versionsFrom = i
	for _, t := range ch.types {
		t.newStream(sameServer)
	}
	back := make(chan struct{})
	ch.switchBack = back
	ch.mu.Unlock()
	ch.c.channelState(ch, true)
	if i > 0 {
		go ch.watchPrimary(sctx, back)
	}

	recvErr := make(chan error, 1)
	go func() { recvErr <- ch.recvLoop(st, i) }()
	proven := time.NewTimer(streamProven)
	defer proven.Stop()
	wasHealthy := func() bool {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.connected == i && ch.healthy
	}
	ch.signal()
	for {
		for _, req := range ch.requests(srv) {
			if err := st.send(req); err != nil {
				if errors.Is(err, io.EOF) {
					// The stream has ended: a receive tells how.
					if rerr := <-recvErr; rerr != nil {
						err = rerr
					}
				} else {
					cancel()
					<-recvErr
				}
				return wasHealthy(), fmt.Errorf("%s: %w", srv.URI, err)
			}
		}
		select {
		case <-ch.wake:
		case <-proven.C:
			ch.markHealthy(i)
		case err := <-recvErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return wasHealthy(), fmt.Errorf("%s: %w", srv.URI, err)
			}
			return wasHealthy(), err
		case <-back:
			cancel()
			<-recvErr
			return true, nil
		case <-ctx.Done():
			cancel()
			<-recvErr
			return wasHealthy(), ctx.Err()
		}
	}
}

// newStream resets a type's per-stream state for a new stream. What was
// due on the old one is moot — unsubscriptions, SotW fetches again, ACKs
// and NACKs: the first request on the new one names every subscription
// anew (§1.6; delta declares what it holds, §2.9). ch.mu is held.
func (t *upType) newStream(sameServer bool) {
	t.requested = false
	// Except a subscription not sent yet — a delta fetch-again (refetch)
	// among them: the first request names it with the rest, and, being
	// due, it is not declared held (deltaRequest), so the server sends it.
	var due map[subKey]*upSub
	for k, s := range t.toSub {
		if t.subs[k] == s {
			if due == nil {
				due = map[subKey]*upSub{}
			}
			due[k] = s
		}
	}
	t.toSub, t.toUnsub = due, nil
	t.bounce, t.forceSend = nil, false
	t.ack, t.nacks = nil, nil
	t.sent = sentRequests{}
	t.fresh = nil
	// A nonce belongs to one stream (§1.1); a version to one server (§1.4:
	// the first request after a reconnect carries the last version seen —
	// from that server).
	t.nonce = ""
	if !sameServer {
		t.version = ""
	}
	t.declare = sameServer
}

// watchPrimary ends a session on a fallback server once the primary server
// is reachable again, so the channel returns to it. It kicks the primary's
// connection at least every backoff interval: after a failure a gRPC
// connection may go idle and wait to be asked.
func (ch *channel) watchPrimary(ctx context.Context, back chan struct{}) {
	// Not before the primary's backoff is over: it may accept connections
	// and fail every stream.
	ch.mu.Lock()
	at := ch.retry[0].at
	ch.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	conn := ch.conns[0]
	interval := ch.c.o.BackoffBase
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			close(back)
			return
		}
		conn.Connect()
		wctx, cancel := context.WithTimeout(ctx, interval)
		conn.WaitForStateChange(wctx, s)
		cancel()
		if ctx.Err() != nil {
			return
		}
		interval = min(interval*2, ch.c.o.BackoffMax)
	}
}

func (ch *channel) recvLoop(st adsStream, i int) error {
	srv := ch.servers[i]
	for first := true; ; first = false {
		m, err := st.recv()
		if err != nil {
			return err
		}
		if first {
			ch.markHealthy(i)
		}
		switch r := m.(type) {
		case *discoveryv3.DiscoveryResponse:
			ch.handleSotW(r, srv)
		case *discoveryv3.DeltaDiscoveryResponse:
			ch.handleDelta(r, srv)
		}
		ch.signal()
	}
}

// node returns the node to send on a stream's first request, with the
// client features this client has: it unwraps SotW resources, and over
// delta it honours TTLs and heartbeats (docs/protocol.md §2.7).
func (ch *channel) node(delta bool) *corev3.Node {
	n := &corev3.Node{}
	if ch.c.b.Node != nil {
		n = proto.Clone(ch.c.b.Node).(*corev3.Node)
	}
	n.ClientFeatures = append(n.ClientFeatures, "xds.config.resource-in-sotw", "xds.config.supports-resource-in-sotw")
	if delta {
		n.ClientFeatures = append(n.ClientFeatures, "xds.config.supports-resource-ttl")
	}
	return n
}

// requests builds what is due on the stream: the first request of each
// type (all its subscriptions; delta with initial_resource_versions),
// subscription changes, and ACKs/NACKs.
func (ch *channel) requests(srv ServerConfig) []proto.Message {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var out []proto.Message
	urls := make([]string, 0, len(ch.types))
	for u := range ch.types {
		urls = append(urls, u)
	}
	sort.Slice(urls, func(i, j int) bool {
		a, b := resource.ForURL(urls[i]), resource.ForURL(urls[j])
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return urls[i] < urls[j]
	})
	first := true
	for _, u := range urls {
		t := ch.types[u]
		// (A nil *Request in a proto.Message would not be nil.)
		var req proto.Message
		if srv.Delta() {
			out = append(out, ch.deltaNACKs(t)...)
			if r := ch.deltaRequest(t); r != nil {
				req = r
			}
		} else {
			if len(t.bounce) > 0 && t.requested {
				out = append(out, ch.sotwBounce(t))
			}
			if r := ch.sotwRequest(t); r != nil {
				req = r
			}
		}
		if req == nil {
			continue
		}
		if first && !ch.anyRequested() {
			switch r := req.(type) {
			case *discoveryv3.DiscoveryRequest:
				r.Node = ch.node(false)
			case *discoveryv3.DeltaDiscoveryRequest:
				r.Node = ch.node(true)
			}
		}
		first = false
		out = append(out, req)
		t.requested = true
	}
	return out
}

func (ch *channel) anyRequested() bool {
	for _, t := range ch.types {
		if t.requested {
			return true
		}
	}
	return false
}

func sortedSubs(m map[subKey]*upSub) []*upSub {
	out := make([]*upSub, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].pkey < out[j].pkey
	})
	return out
}

// sotwBounce is the request without the subscriptions to fetch again; the
// next request puts them back, and the server sends them (§1.6). Being the
// first request since the last response, it carries the ACK or NACK due:
// a server would take a request with that nonce and no error_detail for
// an ACK (§1.3).
func (ch *channel) sotwBounce(t *upType) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce}
	setAck(req, t.ack)
	t.ack = nil
	named := map[subKey]bool{}
	for _, s := range sortedSubs(t.subs) {
		k := subKey{s.name, s.pkey}
		if t.bounce[k] {
			continue
		}
		named[k] = true
		addToRequest(req, s)
	}
	// Until the server answers the next request, a full-state response may
	// leave them out without deleting them (sentRequests).
	if resource.ForURL(t.url).FullState {
		t.sent.record(named)
	}
	t.bounce = nil
	t.forceSend = true // the request that puts them back
	return req
}

// addToRequest names a subscription in a SotW request: by TP2 locator, or
// plainly.
func addToRequest(req *discoveryv3.DiscoveryRequest, s *upSub) {
	if s.tp2 {
		req.ResourceLocators = append(req.ResourceLocators, &discoveryv3.ResourceLocator{Name: s.name, DynamicParameters: s.params})
	} else {
		req.ResourceNames = append(req.ResourceNames, s.name)
	}
}

// sotwRequest: every request carries the whole name list (§1.6); an ACK or
// NACK carries the version and nonce it answers (§1.2, §1.3); a type with
// nothing left is sent an empty list once (the unsubscribe gRPC clients
// send, docs/testing.md).
func (ch *channel) sotwRequest(t *upType) *discoveryv3.DiscoveryRequest {
	changed := len(t.toSub)+len(t.toUnsub) > 0 || t.forceSend
	if t.requested && !changed && t.ack == nil {
		return nil
	}
	if !t.requested && len(t.subs) == 0 {
		return nil
	}
	req := &discoveryv3.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce}
	named := make(map[subKey]bool, len(t.subs))
	for _, s := range sortedSubs(t.subs) {
		named[subKey{s.name, s.pkey}] = true
		addToRequest(req, s)
	}
	if resource.ForURL(t.url).FullState {
		t.sent.record(named)
	}
	setAck(req, t.ack)
	t.toSub, t.toUnsub, t.ack, t.forceSend = nil, nil, nil, false
	return req
}

// setAck makes a SotW request the ACK or NACK a response is due (§1.2,
// §1.3).
func setAck(req *discoveryv3.DiscoveryRequest, a *pendingAck) {
	if a == nil {
		return
	}
	req.VersionInfo, req.ResponseNonce = a.version, a.nonce
	if a.err != "" {
		req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: a.err}
	}
}

// deltaNACKs are the requests of the NACKs a later response overtook
// before they were sent: each carries its own nonce (§2.1).
func (ch *channel) deltaNACKs(t *upType) []proto.Message {
	if !t.requested {
		return nil
	}
	var out []proto.Message
	for _, a := range t.nacks {
		out = append(out, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: a.nonce,
			ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: a.err}})
	}
	t.nacks = nil
	return out
}

// deltaRequest: on a new stream every subscription with what the client
// holds in initial_resource_versions (§2.9); then the changes; ACK/NACK by
// nonce (§2.1).
func (ch *channel) deltaRequest(t *upType) *discoveryv3.DeltaDiscoveryRequest {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.url}
	add := func(s *upSub) {
		if s.tp2 {
			req.ResourceLocatorsSubscribe = append(req.ResourceLocatorsSubscribe, &discoveryv3.ResourceLocator{Name: s.name, DynamicParameters: s.params})
		} else {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, s.name)
		}
	}
	if !t.requested {
		if len(t.subs) == 0 {
			return nil
		}
		for _, s := range sortedSubs(t.subs) {
			add(s)
		}
		// Not declared: what the server must send anew — names a watcher
		// needs its fresh word on, names to fetch again (refetch), what
		// only lingers.
		again := map[string]bool{}
		for k := range t.toSub {
			again[k.name] = true
		}
		for n, vs := range t.held {
			if !t.declare {
				break
			}
			if t.refresh[n] > 0 || again[n] || t.lingering[n] {
				continue
			}
			for _, v := range vs {
				if req.InitialResourceVersions == nil {
					req.InitialResourceVersions = map[string]string{}
				}
				req.InitialResourceVersions[n] = v
				break
			}
		}
	} else {
		for _, s := range sortedSubs(t.toSub) {
			add(s)
		}
		for _, s := range sortedSubs(t.toUnsub) {
			if s.tp2 {
				req.ResourceLocatorsUnsubscribe = append(req.ResourceLocatorsUnsubscribe, &discoveryv3.ResourceLocator{Name: s.name, DynamicParameters: s.params})
			} else {
				req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, s.name)
			}
		}
	}
	if t.ack != nil {
		req.ResponseNonce = t.ack.nonce
		if t.ack.err != "" {
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: t.ack.err}
		}
	}
	if t.requested && t.ack == nil && len(t.toSub)+len(t.toUnsub) == 0 {
		return nil
	}
	t.toSub, t.toUnsub, t.ack = nil, nil, nil
	return req
}

// paramsFor lists the parameter sets this channel subscribes a name with
// (directly, or through a wildcard or glob covering it), for the TP2 check.
func (t *upType) paramsFor(n string) (sets []constraint.Params, legacy bool) {
	g, inGlob := db.InGlob(n)
	for k, s := range t.subs {
		if k.name == n || k.name == db.Wildcard || (inGlob && k.name == g) || t.url == resource.VirtualHostURL {
			if !s.tp2 {
				legacy = true
				continue
			}
			sets = append(sets, s.params)
		}
	}
	return sets, legacy
}

// handleSotW applies a SotW response: the valid resources go to the db, the
// invalid ones are NACKed with the reason while their last good value
// stays; a full-state type's missing resources are deleted (§1.7).
func (ch *channel) handleSotW(r *discoveryv3.DiscoveryResponse, srv ServerConfig) {
	ch.mu.Lock()
	t := ch.types[r.TypeUrl]
	if t == nil {
		ch.mu.Unlock()
		return
	}
	t.nonce = r.Nonce
	ch.responses++
	batch := ch.decodeSotW(t, r)
	if len(batch.errs) == 0 {
		t.version = r.VersionInfo
	} else {
		ch.nackCount++
	}
	// A NACK not sent yet, overtaken by this response, is not lost: over
	// SotW a request carries the newest nonce (§1.1), and a server ignores
	// one with an older nonce (§1.8), so the request answering this
	// response reports what it did not supersede.
	rs := append(unsuperseded(t.ack, batch, resource.ForURL(r.TypeUrl).FullState), batch.rejected...)
	if len(rs) == 0 {
		t.ack = &pendingAck{version: r.VersionInfo, nonce: r.Nonce}
	} else {
		t.ack = nack(t.version, r.Nonce, rs)
	}
	if resource.ForURL(r.TypeUrl).FullState {
		t.sent.answered(batch.puts)
	}
	fullState := resource.ForURL(r.TypeUrl).FullState && !hasFeature(srv, "ignore_resource_deletion")
	if !fullState {
		supersede(t, batch)
	}
	up := ch.apply(t, batch, fullState)
	ch.received += int64(len(batch.puts))
	ch.mu.Unlock()
	ch.logNACK(srv, r.TypeUrl, r.VersionInfo, batch)
	ch.c.applied(ch, r.TypeUrl, up, batch)
}

// unsuperseded returns the rejections of a NACK not sent yet (prev) that
// a newer SotW response b leaves standing: those of resources it does not
// hold, reject again or delete. A full-state response holds the whole
// type (§1.7), so it supersedes them all; a rejection that names no
// resource stands.
func unsuperseded(prev *pendingAck, b *decoded, fullState bool) []rejection {
	if prev == nil || len(prev.rejected) == 0 || fullState {
		return nil
	}
	touched := map[string]bool{}
	for _, v := range b.puts {
		touched[v.Name] = true
	}
	for _, r := range b.rejected {
		touched[r.name] = true
	}
	for _, k := range b.gone {
		touched[k.Name] = true
	}
	for _, n := range b.removed {
		touched[n] = true
	}
	var out []rejection
	for _, r := range prev.rejected {
		if r.name == "" || !touched[r.name] {
			out = append(out, r)
		}
	}
	return out
}

// logNACK logs a response rejected (in part), with the reasons.
func (ch *channel) logNACK(srv ServerConfig, typeURL, version string, b *decoded) {
	if len(b.errs) > 0 {
		ch.c.o.Logger.Warn("xDS response rejected (NACK)", "server", srv.URI, "type", typeURL, "version", version, "reason", strings.Join(b.errs, "; "))
	}
}

func hasFeature(s ServerConfig, f string) bool {
	for _, x := range s.ServerFeatures {
		if x == f {
			return true
		}
	}
	return false
}

// handleDelta applies a delta response (§2).
func (ch *channel) handleDelta(r *discoveryv3.DeltaDiscoveryResponse, srv ServerConfig) {
	ch.mu.Lock()
	t := ch.types[r.TypeUrl]
	if t == nil {
		ch.mu.Unlock()
		return
	}
	ch.responses++
	batch := ch.decodeDelta(t, r)
	if t.ack != nil && t.ack.err != "" {
		// A NACK not sent yet goes before this response's acknowledgement.
		t.nacks = append(t.nacks, t.ack)
	}
	t.ack = &pendingAck{nonce: r.Nonce}
	if len(batch.errs) > 0 {
		t.ack = nack("", r.Nonce, batch.rejected)
		ch.nackCount++
	}
	// A server tells a replaced variant's deletion in the same response
	// (TP2), but cannot when it did not know the client held it (declared
	// by a version that no longer exists after a reconnect).
	supersede(t, batch)
	up := ch.apply(t, batch, false)
	ch.received += int64(len(batch.puts))
	ch.mu.Unlock()
	ch.logNACK(srv, r.TypeUrl, r.SystemVersionInfo, batch)
	ch.c.applied(ch, r.TypeUrl, up, batch)
}

// supersede drops the held variants that a response replaces without
// saying so (ch.mu is held). A SotW response that is not full state cannot
// tell that a variant went, nor a delta server that did not know the
// client held it; but a server sends a TP2 subscription the one
// variant that matches its parameters, and a resource's variants never
// overlap (docs/protocol.md §4.1, §4.3). So a variant sent for a subscription
// replaces every other held variant of the name that matches it too — the
// unconstrained variant replaced by env=test and env=prod ones, say — which
// the server no longer has. Names some plain (non-TP2) subscription also
// covers are left alone: what those were sent carries no constraints.
func supersede(t *upType, b *decoded) {
	present := presentVariants(b.puts)
	plain, tp2 := map[string]bool{}, map[string]bool{}
	for k, sub := range t.subs {
		if sub.tp2 {
			tp2[k.name] = true
		} else {
			plain[k.name] = true
		}
	}
	gone := map[resource.Key]bool{}
	for _, k := range b.gone {
		gone[k] = true
	}
	// drop: the held variants of n this response did not send, and goes
	// says are replaced, are gone.
	drop := func(n string, goes func(ck string) bool) {
		for ck := range t.held[n] {
			key := resource.Key{Type: t.url, Name: n, Constraints: ck}
			if !present[n][ck] && !gone[key] && goes(ck) {
				gone[key] = true
				b.gone = append(b.gone, key)
			}
		}
	}
	for k, sub := range t.subs {
		if sub.tp2 && !plain[k.name] && present[k.name] != nil && anyMatches(b.puts, k.name, sub.params) {
			drop(k.name, func(ck string) bool { return keyMatches(ck, sub.params) })
		}
	}
	// A name only plain subscriptions cover is sent the one variant the
	// server picks for this client (by its node): the one sent replaces
	// whatever else is held under the name. (It carries its constraints
	// when the client takes wrapped SotW resources, so it does not simply
	// overwrite the unconstrained copy.)
	for n := range plain {
		if !tp2[n] && present[n] != nil {
			drop(n, func(string) bool { return true })
		}
	}
}

// keyMatches reports whether the constraints with canonical key ck match
// params (false for a key that does not parse).
func keyMatches(ck string, params constraint.Params) bool {
	var cons constraint.Constraints
	if ck != "" {
		if err := cons.UnmarshalText([]byte(ck)); err != nil {
			return false
		}
	}
	return cons.Match(params)
}

// presentVariants indexes variants by name and constraint key.
func presentVariants(vs []*resource.Variant) map[string]map[string]bool {
	present := map[string]map[string]bool{}
	for _, v := range vs {
		if present[v.Name] == nil {
			present[v.Name] = map[string]bool{}
		}
		present[v.Name][v.Constraints.Key()] = true
	}
	return present
}

// apply records a decoded response as held and turns it into a db update.
// With fullState, held resources the response left out are deleted.
func (ch *channel) apply(t *upType, b *decoded, fullState bool) db.Update {
	var u db.Update
	if len(b.puts) > 0 {
		// A resource no subscription covers any more — sent before the
		// server saw the unsubscription — is not cached: nothing would evict
		// it, and a later watcher would be served it stale. A virtual host
		// is covered by the names it answers as an alias of, or, for an
		// update, by being held already.
		wants := t.wanted()
		answers := map[string]bool{}
		for alias, vh := range b.aliases {
			if wants(alias) {
				answers[vh] = true
			}
		}
		vhds := t.url == resource.VirtualHostURL
		kept := b.puts[:0]
		for _, v := range b.puts {
			if wants(v.Name) || vhds && (answers[v.Name] || t.held[v.Name] != nil) {
				kept = append(kept, v)
			}
		}
		clear(b.puts[len(kept):])
		b.puts = kept
	}
	present := presentVariants(b.puts)
	for _, v := range b.puts {
		if t.held[v.Name] == nil {
			t.held[v.Name] = map[string]string{}
		}
		t.held[v.Name][v.Constraints.Key()] = v.Version
	}
	u.Puts = b.puts
	if fullState && len(b.errs) == 0 {
		// A full-state response is the whole truth about what the request
		// it answers named (docs/protocol.md §1.7): what it leaves out of that
		// is deleted, or does not exist. A name subscribed since may be
		// left out only because the server had not seen it yet.
		all, named := t.namedByAnswered()
		for n, cks := range t.held {
			if !all && !named[n] {
				continue
			}
			for ck := range cks {
				if !present[n][ck] {
					b.gone = append(b.gone, resource.Key{Type: t.url, Name: n, Constraints: ck})
				}
			}
		}
		seen := map[string]bool{}
		for k, sub := range t.subs {
			if k.name == db.Wildcard || !(all || named[k.name]) {
				continue
			}
			if present[k.name] == nil && t.held[k.name] == nil && !seen[k.name] {
				seen[k.name] = true
				b.removed = append(b.removed, k.name)
			}
			// TP2: the name is there, but no variant for these parameters —
			// for them, it does not exist (TP2 "Best Practices").
			if present[k.name] != nil && sub.tp2 && !anyMatches(b.puts, k.name, sub.params) {
				b.noVariant = append(b.noVariant, db.Key{Type: t.url, Name: k.name, ParamsKey: k.pkey})
			}
		}
	}
	for _, k := range b.gone {
		if t.unhold(k) {
			// The last variant went: the resource is gone.
			b.emptied = append(b.emptied, k.Name)
		}
		u.Deletes = append(u.Deletes, k)
	}
	for _, n := range b.removed {
		for ck := range t.held[n] {
			u.Deletes = append(u.Deletes, resource.Key{Type: t.url, Name: n, Constraints: ck})
		}
		delete(t.held, n)
	}
	ch.ttls(t, b)
	u.Known = append(t.answered(b), b.noVariant...)
	b.gen = ch.gen
	for _, ns := range [][]string{b.removed, b.emptied, b.notFound} {
		b.answered = append(b.answered, ns...)
	}
	for _, v := range b.puts {
		b.answered = append(b.answered, v.Name)
	}
	for a := range b.aliases {
		b.answered = append(b.answered, a)
	}
	return u
}

// ttls keeps the TTL timers in step with a response (ch.mu is held): a
// variant with a TTL (re)starts its timer, one without stops it, a
// heartbeat of the version held renews it, a removal stops it.
func (ch *channel) ttls(t *upType, b *decoded) {
	for _, v := range b.puts {
		ch.setTTL(t, v.Name, v.Constraints.Key(), v.Version, v.TTL)
	}
	for _, h := range b.heartbeats {
		if t.held[h.name][h.ckey] == h.version {
			ch.setTTL(t, h.name, h.ckey, h.version, h.ttl)
			ch.c.o.Logger.Debug("xDS TTL renewed", "type", t.url, "name", h.name, "ttl", h.ttl)
		}
	}
	for _, k := range b.gone {
		ch.setTTL(t, k.Name, k.Constraints, "", 0)
	}
	for _, n := range b.removed {
		for k := range t.ttl {
			if k[0] == n {
				ch.setTTL(t, n, k[1], "", 0)
			}
		}
	}
}

// setTTL starts (ttl > 0) or stops a held variant's TTL timer.
func (ch *channel) setTTL(t *upType, n, ck, version string, ttl time.Duration) {
	k := [2]string{n, ck}
	if old := t.ttl[k]; old != nil {
		old.Stop()
		delete(t.ttl, k)
	}
	if ttl <= 0 {
		return
	}
	if t.ttl == nil {
		t.ttl = map[[2]string]*ttlTimer{}
	}
	// The timer's identity is known before it can fire (a timer variable
	// assigned after AfterFunc returns would race with a short TTL).
	tm := &ttlTimer{}
	tm.Timer = time.AfterFunc(ttl, func() { ch.expire(t.url, n, ck, version, tm) })
	t.ttl[k] = tm
}

// ttlTimer is a held variant's TTL timer.
type ttlTimer struct{ *time.Timer }

// expire drops a variant whose TTL ran out with no renewal: to the cache
// and its watchers, as if the server had removed it.
func (ch *channel) expire(typeURL, n, ck, version string, tm *ttlTimer) {
	ch.mu.Lock()
	t := ch.types[typeURL]
	if t == nil || t.ttl[[2]string{n, ck}] != tm || t.held[n][ck] != version {
		ch.mu.Unlock()
		return // renewed, replaced or gone meanwhile
	}
	d := &decoded{gone: []resource.Key{{Type: typeURL, Name: n, Constraints: ck}}}
	up := ch.apply(t, d, false)
	if t.lingering[n] {
		// Nothing subscribes to it: the cache drops it, and no status of it
		// is kept.
		d.emptied = nil
		if t.held[n] == nil {
			delete(t.lingering, n)
		}
	}
	ch.mu.Unlock()
	ch.c.applied(ch, typeURL, up, d)
	// (Once the cache has dropped it.)
	ch.c.o.Logger.Info("xDS resource expired: its TTL passed with no renewal", "type", typeURL, "name", n, "constraints", ck, "version", version)
}

// anyMatches reports whether a variant of n among vs matches params.
func anyMatches(vs []*resource.Variant, n string, params constraint.Params) bool {
	for _, v := range vs {
		if v.Name == n && v.Constraints.Match(params) {
			return true
		}
	}
	return false
}

// answeredNow records what a response answered of the names in need of
// a fresh word, once the cache holds it.
func (ch *channel) answeredNow(typeURL string, d *decoded) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.types[typeURL]
	if t == nil || d.gen != ch.gen || len(t.refresh) == 0 {
		return
	}
	for _, n := range d.answered {
		if t.refresh[n] > 0 {
			if t.fresh == nil {
				t.fresh = map[string]bool{}
			}
			t.fresh[n] = true
		}
	}
}

// hasAnswered reports whether the stream now up, a healthy one, has
// answered for a name.
func (ch *channel) hasAnswered(typeURL, n string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.types[typeURL]
	return ch.connected >= 0 && ch.healthy && t != nil && t.fresh[n]
}

// needFresh counts a need (add 1) or its end (add -1) for the server's
// fresh word on a name: while needed, a reconnecting stream does not
// declare the version held, so the server sends it again.
func (ch *channel) needFresh(typeURL, n string, add int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.typ(typeURL)
	if t.refresh == nil {
		t.refresh = map[string]int{}
	}
	first := add > 0 && t.refresh[n] == 0
	if t.refresh[n] += add; t.refresh[n] <= 0 {
		delete(t.refresh, n)
	}
	if !first || ch.connected < 0 || !t.requested {
		return
	}
	// A stream is open (not proven yet, or the watcher would not need this)
	// and has asked for the name already: it may have declared the version
	// held, or been answered before this need. Fetch the name again, so
	// that its server's word comes on this stream.
	for k, s := range t.subs {
		if k.name != n {
			continue
		}
		if ch.servers[ch.connected].Delta() {
			if t.toSub == nil {
				t.toSub = map[subKey]*upSub{}
			}
			t.toSub[k] = s
		} else {
			ch.bounceLocked(t, k)
		}
	}
	ch.signal()
}

// namedByAnswered tells which names the request the latest SotW response
// answers surely covered: all of them when the wildcard was in every
// request it may answer, else those whose every subscription was.
func (t *upType) namedByAnswered() (all bool, names map[string]bool) {
	names = map[string]bool{}
	not := map[string]bool{}
	for k := range t.subs {
		switch {
		case !t.sent.named(k):
			not[k.name] = true
		case k.name == db.Wildcard:
			all = true
		default:
			names[k.name] = true
		}
	}
	for n := range not {
		delete(names, n)
	}
	return all, names
}

// answered lists the subscriptions a response answered — with a variant
// for their parameters, or by saying there is none — so that a relay tells
// its downstream clients only what its upstream has said (db.NewCache).
func (t *upType) answered(b *decoded) []db.Key {
	absent := map[string]bool{}
	for _, ns := range [][]string{b.removed, b.emptied, b.notFound} {
		for _, n := range ns {
			absent[n] = true
		}
	}
	byName := map[string][]*resource.Variant{}
	inGlob := map[string]bool{}
	for _, v := range b.puts {
		byName[v.Name] = append(byName[v.Name], v)
		if g, ok := db.InGlob(v.Name); ok {
			inGlob[g] = true
		}
	}
	goneBy := map[string][]string{}
	for _, k := range b.gone {
		goneBy[k.Name] = append(goneBy[k.Name], k.Constraints)
	}
	var out []db.Key
	for k, s := range t.subs {
		n := k.name
		known := absent[n] || b.aliases[n] != ""
		switch {
		case known:
		case n == db.Wildcard:
			known = true // a response of the type answers the wildcard
		case inGlob[n]:
			known = true
		default:
			for _, v := range byName[n] {
				known = known || !s.tp2 || v.Constraints.Match(s.params)
			}
			for _, ck := range goneBy[n] {
				// The variant serving these parameters went, and nothing
				// replaced it in the same response (TP2: a replacement
				// comes in one response): there is none for them.
				if c, err := constraint.Parse(ck); err == nil && (!s.tp2 || c.Match(s.params)) {
					known = true
				}
			}
		}
		if known {
			out = append(out, db.Key{Type: t.url, Name: n, ParamsKey: k.pkey})
		}
	}
	return out
}

// forgetVariants drops what the channel holds of single variants the cache
// evicted (a parameter set's, while others still follow the name): their
// versions and TTL timers.
func (ch *channel) forgetVariants(keys []resource.Key) {
	if len(keys) == 0 {
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	t := ch.types[keys[0].Type]
	if t == nil {
		return
	}
	for _, k := range keys {
		t.unhold(k)
	}
	t.stopUnheldTTLs()
}

// unhold drops one held variant; it reports whether it was the name's
// last. ch.mu is held.
func (t *upType) unhold(k resource.Key) (emptied bool) {
	cks := t.held[k.Name]
	if cks == nil {
		return false
	}
	delete(cks, k.Constraints)
	if len(cks) > 0 {
		return false
	}
	delete(t.held, k.Name)
	return true
}
