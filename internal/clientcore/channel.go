package clientcore

import (
	"context"
	"time"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// upType is a channel's state for one resource type. Its subscriptions
// are the db's interests in the type routed to this channel, each with
// Locator set when it goes upstream as a TP2 resource locator.
type upType struct {
	url  string
	subs map[db.Key]*db.Sub

	// On the current stream: whether the type was requested yet, and (delta)
	// the subscription changes not yet sent.
	requested      bool
	toSub, toUnsub map[db.Key]*db.Sub
	// bounce (SotW) holds subscriptions to fetch again: a request without
	// them, then one with them, makes the server send them anew.
	bounce    map[db.Key]bool
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
	// retained: held names nothing subscribes to any more, whose cache
	// entries the client keeps while no healthy stream is up (outage
	// retention, docs/architecture.md §8). They keep their TTLs, are not declared to a reconnecting
	// stream, and are let go of once a stream is healthy (markHealthy).
	retained map[string]bool
}

// channel is the upstream of one server list (an authority's, or the
// top-level one): one ADS stream at a time to one of its servers (in
// order, falling back to the next when one fails and returning to the
// first when it is back), and the state the cache keeps of it. The stream
// is kept by the channel's goroutines (session.go); everything else is
// owned by the client's state goroutine, and so is every method here.
type channel struct {
	c       *Client
	key     string
	servers []clientdata.ServerConfig
	tr      transport

	wake   chan struct{} // signals the session that requests may be due
	cancel context.CancelFunc
	done   chan struct{} // closed when the channel's goroutine has ended

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
	received     int64     // resources received, for tests and metrics
	responses    int64
	nackCount    int64
}

// newChannel makes the channel of servers and starts its goroutine.
func newChannel(c *Client, key string, servers []clientdata.ServerConfig) (*channel, error) {
	tr, err := dial(servers, c.o)
	if err != nil {
		return nil, err
	}
	ch := &channel{c: c, key: key, servers: servers, tr: tr, wake: make(chan struct{}, 1), done: make(chan struct{}),
		types: map[string]*upType{}, connected: -1, versionsFrom: -1, downSince: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	ch.cancel = cancel
	go ch.run(ctx)
	return ch, nil
}

// stop ends the channel's goroutines and connections; it is called once
// the state goroutine has ended (their calls into it return at once).
func (ch *channel) stop() {
	ch.cancel()
	<-ch.done
	ch.tr.close()
}

// stopTimers stops the TTL timers (the client is closing).
func (ch *channel) stopTimers() {
	for _, t := range ch.types {
		for _, tm := range t.ttl {
			tm.Stop()
		}
		t.ttl = nil
	}
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
		t = &upType{url: url, subs: map[db.Key]*db.Sub{}, held: map[string]map[string]string{}}
		ch.types[url] = t
	}
	return t
}

// subscribe adds an upstream subscription (from a db interest).
func (ch *channel) subscribe(s *db.Sub) {
	t := ch.typ(s.Type)
	k := s.Key
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
		ch.bounceSub(t, k)
	}
	if t.toSub == nil {
		t.toSub = map[db.Key]*db.Sub{}
	}
	t.toSub[k] = s
	if len(t.retained) > 0 {
		wants := t.wanted()
		for n := range t.retained {
			if wants(n) {
				delete(t.retained, n) // subscribed again: held as any other
			}
		}
	}
	ch.signal()
}

// lookup finds an upstream subscription (s is nil if there is none).
func (ch *channel) lookup(k db.Key) (t *upType, s *db.Sub) {
	if t = ch.types[k.Type]; t != nil {
		s = t.subs[k]
	}
	return t, s
}

// unsubscribe removes an upstream subscription. What no remaining
// subscription covers is no longer held — for a glob or the wildcard, its
// members too — so that a reconnecting stream does not declare versions of
// what the cache evicted (docs/protocol.md §2.9), and the client forgets what it
// knew of them. While no healthy stream is up the client keeps their cache
// entries instead (Client.interest): they are retained, held with their
// TTLs. It reports whether they are.
func (ch *channel) unsubscribe(k db.Key) (retained bool) {
	retain := ch.connected < 0 || !ch.healthy
	t, s := ch.lookup(k)
	if s == nil {
		return retain
	}
	delete(t.subs, k)
	delete(t.toSub, k)
	if t.toUnsub == nil {
		t.toUnsub = map[db.Key]*db.Sub{}
	}
	t.toUnsub[k] = s
	wants := t.wanted()
	drop := func(n string) {
		if !retain {
			delete(t.held, n)
			return
		}
		if t.retained == nil {
			t.retained = map[string]bool{}
		}
		t.retained[n] = true
	}
	if s.IsCollection() {
		for n := range t.held {
			if !wants(n) {
				drop(n)
			}
		}
	} else if !wants(s.Name) && t.held[s.Name] != nil {
		drop(s.Name)
	}
	t.stopUnheldTTLs()
	ch.signal()
	if s.IsCollection() && !wants(s.Name) {
		ch.c.forgetMembers(ch, s.Type, s.Name)
	}
	return retain
}

// stopUnheldTTLs stops the TTL timers of variants no longer held.
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
	t := ch.types[typeURL]
	if t == nil {
		return
	}
	wants := t.wanted()
	for _, n := range names {
		if !wants(n) {
			delete(t.held, n)
			delete(t.retained, n)
		}
	}
	t.stopUnheldTTLs()
}

// forgetRetained lets go of what was retained through an outage and was not
// subscribed again, now that a healthy stream is up: the client evicts it
// from the cache (Client.healthy).
func (ch *channel) forgetRetained() {
	for _, t := range ch.types {
		if len(t.retained) == 0 {
			continue
		}
		wants := t.wanted()
		for n := range t.retained {
			if !wants(n) {
				delete(t.held, n)
			}
		}
		t.retained = nil
		t.stopUnheldTTLs()
	}
}

// forgetVariants drops what the channel holds of single variants the cache
// evicted (a parameter set's, while others still follow the name): their
// versions and TTL timers.
func (ch *channel) forgetVariants(keys []resource.Key) {
	if len(keys) == 0 {
		return
	}
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
// last.
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

// wanted returns whether a name is still subscribed: by name, by the
// wildcard, or by a glob it is an immediate child of.
func (t *upType) wanted() func(n string) bool {
	names := make(map[string]bool, len(t.subs))
	for k := range t.subs {
		names[k.Name] = true
	}
	return func(n string) bool {
		if names[n] || names[db.Wildcard] {
			return true
		}
		g, ok := db.InGlob(n)
		return ok && names[g]
	}
}

// paramsFor lists the parameter sets this channel subscribes a name with
// (directly, or through a wildcard or glob covering it), for the TP2 check.
func (t *upType) paramsFor(n string) (sets []constraint.Params, legacy bool) {
	g, inGlob := db.InGlob(n)
	for k, s := range t.subs {
		if k.Name == n || k.Name == db.Wildcard || (inGlob && k.Name == g) || t.url == resource.VirtualHostURL {
			if !s.Locator {
				legacy = true
				continue
			}
			sets = append(sets, s.Params)
		}
	}
	return sets, legacy
}

// answeredNow records what a response answered of the names in need of
// a fresh word, once the cache holds it.
func (ch *channel) answeredNow(typeURL string, d *decoded) {
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
	t := ch.types[typeURL]
	return ch.up() && t != nil && t.fresh[n]
}

// up reports whether the channel has a healthy stream.
func (ch *channel) up() bool { return ch.connected >= 0 && ch.healthy }

// upstream describes the channel for Upstreams.
func (ch *channel) upstream() clientdata.Upstream {
	u := clientdata.Upstream{}
	for _, s := range ch.servers {
		u.Servers = append(u.Servers, s.URI)
	}
	switch {
	case ch.up():
		u.Connected = ch.servers[ch.connected].URI
	case ch.connected >= 0:
		u.Connecting = ch.servers[ch.connected].URI
		fallthrough
	default:
		u.DownSince = ch.downSince.UTC().Format(time.RFC3339Nano)
	}
	if ch.lastErr != nil {
		u.LastError = ch.lastErr.Error()
	}
	for _, t := range ch.types {
		u.Subscriptions += len(t.subs)
	}
	u.Responses, u.Resources, u.NACKs = ch.responses, ch.received, ch.nackCount
	return u
}
