package client

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// DoesNotExistTimeout is how long a subscribed resource may go
	// unanswered on a connected stream before watchers are told it does not
	// exist (SotW has no such signal; docs/protocol.md §1.8). Default 15s;
	// negative: never (a relay passes on only what its upstream says, and
	// leaves the timing out to its own clients).
	DoesNotExistTimeout time.Duration
	// AltTimeout is how long a name's authority may be unreachable before
	// its #alt= URL is fetched instead. Default 5s.
	AltTimeout time.Duration
	// BackoffBase and BackoffMax bound reconnection backoff (exponential,
	// with jitter). Defaults 100ms and 30s.
	BackoffBase, BackoffMax time.Duration
	// MaxRedirects bounds a chain of TP1 redirects. Default 8.
	MaxRedirects int
	// Validate, when set, is an application's own check of every resource
	// received; an error rejects (NACKs) the resource and keeps its last
	// good value. It runs on the stream's receiving goroutine while the
	// response is applied: it must be quick and must not call the Client.
	Validate func(v *resource.Variant, m proto.Message) error
	// DialOptions are added to every server connection.
	DialOptions []grpc.DialOption
	// Locators sends every subscription as a TP2 resource locator, even
	// with no parameters (a relay uses it, so its downstream clients'
	// parameters, not its own node, select variants upstream).
	Locators bool
	// Subscribed, when set, is told of every subscription to the cache and
	// whether it could be answered from it at once (a relay's hit/miss
	// metrics).
	Subscribed func(i db.Sub, cached bool)
	// AnyAuthority routes names of authorities the bootstrap does not list
	// to its top-level servers instead of failing them (a relay with one
	// upstream serves every authority through it).
	AnyAuthority bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Client is an xDS client: it subscribes to resources of any type from the
// servers of their authorities and caches them in a db.
type Client struct {
	b  *Bootstrap
	o  Options
	db *db.DB

	// imu orders the interest hook with the eviction of what lingered
	// (healthy): each sees the other's changes to the cache, to what
	// channels hold and to lingering whole. Taken before mu.
	imu sync.Mutex

	mu       sync.Mutex
	channels map[string]*channel
	status   map[[2]string]*resStatus
	// lingering are ended interests whose cache entries outlive them
	// because their upstream is down: a subscriber arriving meanwhile (a
	// client restarted during the outage) is served from the cache. They
	// are evicted once the upstream is healthy again.
	lingering map[db.Key]linger
	watchers  map[[2]string]map[*watcher]struct{} // by (type, name) watched or followed
	altTimers map[*time.Timer]struct{}            // pending #alt= rechecks, stopped by Close
	closed    bool
	nextID    uint64

	dmu   sync.Mutex // guards dirty
	dirty map[*watcher]struct{}
	// deliverG is the delivery goroutine's id: a cancel called from it (a
	// handler cancelling a watch) must not wait for a delivery to end.
	deliverG atomic.Uint64
	kick     chan struct{}
	stop     chan struct{} // closed by Close: the delivery goroutine ends
	done     chan struct{} // closed when the delivery goroutine has ended
	// closedChans is closed once Close has closed every channel.
	closedChans chan struct{}
}

// linger is an ended interest whose cache entries outlive it: the channel
// it was subscribed on, and (VHDS) the virtual host its name resolved to,
// which is evicted with it.
type linger struct {
	ch    *channel
	alias string
	sub   db.Sub
}

// resStatus is what the client knows of one resource beyond its contents.
type resStatus struct {
	got      bool
	absent   bool   // the server says it does not exist, or it never came
	err      string // the reason the last version was rejected
	alias    string // VHDS: the virtual host a requested name resolved to
	timer    *time.Timer
	interest int
}

// New starts a client. Close it when done.
func New(b *Bootstrap, o Options) (*Client, error) {
	if b == nil || len(b.Servers) == 0 {
		return nil, errors.New("client: a bootstrap with at least one server is needed")
	}
	if o.DoesNotExistTimeout == 0 {
		o.DoesNotExistTimeout = 15 * time.Second
	}
	if o.AltTimeout <= 0 {
		o.AltTimeout = 5 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 100 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 8
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &Client{b: b, o: o, channels: map[string]*channel{}, status: map[[2]string]*resStatus{}, lingering: map[db.Key]linger{},
		watchers: map[[2]string]map[*watcher]struct{}{}, dirty: map[*watcher]struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), closedChans: make(chan struct{})}
	c.db = db.NewCache(db.Hooks{Interest: c.interest, Subscribed: c.subscribed})
	go c.deliverLoop()
	return c, nil
}

// DB is the client's cache: what a relay serves downstream.
func (c *Client) DB() *db.DB { return c.db }

// Close stops every stream and watcher. Once it returns no handler is
// called — but Close may be called from a handler, and then it returns
// without waiting for the handler (the caller itself) to end: no handler
// is called after that one returns. A Close racing another waits for it.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closedChans
		c.waitDelivery()
		return
	}
	c.closed = true
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	for _, st := range c.status {
		if st.timer != nil {
			st.timer.Stop()
		}
	}
	for tm := range c.altTimers {
		tm.Stop()
	}
	c.altTimers = nil
	c.mu.Unlock()
	for _, ch := range chans {
		ch.close()
	}
	close(c.closedChans)
	close(c.stop)
	c.waitDelivery()
}

// stopped reports whether Close has ended delivery: a handler that closed
// the client is the last one called.
func (c *Client) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// waitDelivery waits for the delivery goroutine to end, unless it is the
// caller (a handler closing the client).
func (c *Client) waitDelivery() {
	if goroutineID() != c.deliverG.Load() {
		<-c.done
	}
}

// route finds the channel serving a resource name: by its authority for an
// xdstp:// name (federation), the top-level servers for a legacy name.
func (c *Client) route(n string) (*channel, error) {
	authority, legacy := "", true
	if u, err := name.Parse(n); err == nil && u.IsXDSTP() {
		authority, legacy = u.Authority, false
	}
	servers, err := c.b.ServersFor(authority, legacy)
	if err != nil && c.o.AnyAuthority {
		servers, err = c.b.ServersFor("", true)
	}
	if err != nil {
		return nil, err
	}
	var key string
	for _, s := range servers {
		key += s.Key() + "\x00"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("client closed")
	}
	if ch := c.channels[key]; ch != nil {
		return ch, nil
	}
	ch, err := newChannel(c, key, servers)
	if err != nil {
		return nil, err
	}
	c.channels[key] = ch
	return ch, nil
}

// interest is the db hook: the first subscription of a (type, name,
// parameters) starts an upstream subscription, the last one ends it. So
// many watchers — or a relay's many downstream streams — share one.
func (c *Client) interest(i db.Sub, on bool) {
	c.imu.Lock()
	defer c.imu.Unlock()
	ch, err := c.route(i.Name)
	k := [2]string{i.Type, i.Name}
	if err != nil {
		// Unroutable (an unknown authority): the status carries the error
		// for watchers, and goes with the last interest.
		c.mu.Lock()
		st := c.statusLocked(k)
		if on {
			st.interest++
			st.err = err.Error()
		} else if st.interest--; st.interest <= 0 {
			delete(c.status, k)
		}
		c.mu.Unlock()
		c.schedule(k)
		return
	}
	if !on {
		// The channel decides whether what the interest covered lingers
		// (its stream is not healthy) and keeps holding it if so: the cache
		// entry lingers on that decision, not on the stream's state a moment
		// later.
		lingered := ch.unsubscribe(i.Type, i.Name, i.ParamsKey)
		c.mu.Lock()
		st := c.status[k]
		if st != nil {
			if st.interest--; st.interest <= 0 {
				if st.timer != nil {
					st.timer.Stop()
				}
				delete(c.status, k)
			}
		}
		alias := ""
		if st != nil {
			alias = st.alias
		}
		// (Not the last interest in the name: the variant these parameters
		// selected goes, or lingers, all the same — unless another
		// parameter set selects it too; see evict.)
		if lingered {
			c.lingering[i.Key] = linger{ch: ch, alias: alias, sub: i}
		}
		c.mu.Unlock()
		if !lingered {
			c.evict(ch, i, alias)
		}
		return
	}
	s := &upSub{name: i.Name, params: i.Params, pkey: i.ParamsKey, tp2: i.ParamsKey != "" || c.o.Locators}
	c.mu.Lock()
	delete(c.lingering, i.Key) // followed again: its cache entry is current once more
	st := c.statusLocked(k)
	st.interest++
	if !st.got && !st.absent && st.timer == nil && ch.isConnected() {
		c.startTimerLocked(k, st)
	}
	c.mu.Unlock()
	ch.subscribe(i.Type, s)
}

// subscribed is the db hook called on every subscription: a cached copy
// marked do_not_cache may not answer it, so it is fetched again upstream.
func (c *Client) subscribed(i db.Sub) {
	var v *resource.Variant
	c.db.Read(func(r *db.Reader) { v = r.Get(i.Type, i.Name, i.Params) })
	if v != nil && v.DoNotCache {
		if ch, err := c.route(i.Name); err == nil {
			ch.refetch(i.Type, i.Name, i.ParamsKey)
		}
	}
	if c.o.Subscribed != nil {
		c.o.Subscribed(i, v != nil)
	}
}

// evict drops from the cache what an ended interest covered — the
// resource, a glob's members, a wildcard's resources, the virtual host a
// VHDS name resolved to — unless another interest still covers it (TP2: a
// cache entry goes when its last subscription does; nothing unsubscribed
// may be served stale). What the channel held of them goes too, so a
// reconnecting stream does not declare it (docs/protocol.md §2.9), and so do
// their statuses.
func (c *Client) evict(ch *channel, i db.Sub, alias string) {
	var names []string
	c.db.Read(func(r *db.Reader) {
		switch {
		case i.Name == db.Wildcard:
			names = r.Names(i.Type)
		case db.IsGlob(i.Name):
			names = r.GlobNames(i.Type, i.Name)
		default:
			names = []string{i.Name}
			if alias == "" && i.Type == resource.VirtualHostURL {
				// The answer may be in the cache with the name's status not
				// yet told its alias (a watcher can see it first): resolve
				// the name as the cache does.
				if v := r.ResolveVirtualHost(i.Name, i.Params); v != nil && v.Name != i.Name {
					alias = v.Name
				}
			}
			if alias != "" {
				names = append(names, alias)
			}
		}
	})
	c.mu.Lock()
	var gone []db.Key
	var goneNames []string
	// Other parameter sets still following the name: only the variants
	// none of them selects go (an unfollowed variant would be served stale
	// to the next subscriber with these parameters).
	selective := len(names) == 1 && names[0] == i.Name && !isCollection(i.Name) && c.coveredLocked(i.Type, i.Name)
	for _, n := range names {
		if !c.coveredLocked(i.Type, n) {
			gone = append(gone, db.Key{Type: i.Type, Name: n})
			goneNames = append(goneNames, n)
			c.dropIdleLocked([2]string{i.Type, n})
		}
	}
	c.mu.Unlock()
	var goneVariants []resource.Key
	if selective {
		// (Not under c.mu: the db is read before c.mu elsewhere.)
		goneVariants = c.unselected(ch, i)
	}
	ch.forget(i.Type, goneNames)
	ch.forgetVariants(goneVariants)
	// Forget that the source answered for the name: a later subscription
	// must ask again.
	u := db.Update{Removes: gone, Deletes: goneVariants, Unknown: []db.Key{i.Key, {Type: i.Type, Name: i.Name, ParamsKey: db.AnyParams}}}
	if alias != "" {
		u.Unknown = append(u.Unknown, db.Key{Type: i.Type, Name: alias, ParamsKey: i.ParamsKey})
	}
	c.db.Update(u)
}

// unselected returns the cached variants of i's name that no parameter set
// still subscribed to the name selects, once i has ended; none when a
// subscription that is not by parameters (the server picks its variant by
// node), the wildcard or a glob covers the name. c.mu is not held.
func (c *Client) unselected(ch *channel, i db.Sub) []resource.Key {
	ch.mu.Lock()
	var remaining []constraint.Params
	all := false
	if t := ch.types[i.Type]; t != nil {
		for k, s := range t.subs {
			switch {
			case k.name == i.Name && s.tp2:
				remaining = append(remaining, s.params)
			case k.name == i.Name, k.name == db.Wildcard:
				all = true
			default:
				if g, ok := db.InGlob(i.Name); ok && g == k.name {
					all = true
				}
			}
		}
	}
	ch.mu.Unlock()
	if all {
		return nil
	}
	var out []resource.Key
	c.db.Read(func(r *db.Reader) {
		keep := map[*resource.Variant]bool{}
		for _, p := range remaining {
			if v := r.Get(i.Type, i.Name, p); v != nil {
				keep[v] = true
			}
		}
		for _, v := range r.Variants(i.Type, i.Name) {
			if !keep[v] {
				out = append(out, v.Key())
			}
		}
	})
	return out
}

// forgetMembers drops what the client knew of a glob's or the wildcard's
// members once nothing subscribes to it any more: a status with no
// interest of its own (got, absent) would outlive the cache entry it
// described, and keep a later watch of the member from its does-not-exist
// timer. Members something else still subscribes to are kept.
func (c *Client) forgetMembers(ch *channel, typeURL, coll string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch.mu.Lock()
	wants := func(string) bool { return false }
	if t := ch.types[typeURL]; t != nil {
		wants = t.wanted()
	}
	ch.mu.Unlock()
	for k, st := range c.status {
		if k[0] != typeURL || st.interest > 0 || st.timer != nil || wants(k[1]) {
			continue
		}
		if g, ok := db.InGlob(k[1]); coll != db.Wildcard && (!ok || g != coll) {
			continue
		}
		delete(c.status, k)
	}
}

// coveredLocked reports whether a remaining interest covers a resource.
func (c *Client) coveredLocked(typeURL, n string) bool {
	covers := func(name string) bool {
		st := c.status[[2]string{typeURL, name}]
		return st != nil && st.interest > 0
	}
	if covers(n) || covers(db.Wildcard) {
		return true
	}
	if g, ok := db.InGlob(n); ok && covers(g) {
		return true
	}
	if typeURL != resource.VirtualHostURL {
		return false // only on-demand VHDS names have aliases
	}
	for k, st := range c.status {
		if k[0] == typeURL && st.alias == n && st.interest > 0 {
			return true
		}
	}
	return false
}

// dropIdleLocked forgets the status of a resource nothing covers any more
// (no interest of its own, nor a wildcard, glob or VHDS name's), unless a
// does-not-exist timer runs for it. c.mu is held.
func (c *Client) dropIdleLocked(k [2]string) {
	if st := c.status[k]; st != nil && st.interest <= 0 && st.timer == nil && !c.coveredLocked(k[0], k[1]) {
		delete(c.status, k)
	}
}

func (c *Client) statusLocked(k [2]string) *resStatus {
	st := c.status[k]
	if st == nil {
		st = &resStatus{}
		c.status[k] = st
	}
	return st
}

// startTimerLocked arms the does-not-exist timer (docs/protocol.md §1.8).
func (c *Client) startTimerLocked(k [2]string, st *resStatus) {
	// (Closed: a stream coming up as Close stops them starts none.)
	if k[1] == db.Wildcard || c.o.DoesNotExistTimeout < 0 || c.closed {
		return
	}
	st.timer = time.AfterFunc(c.o.DoesNotExistTimeout, func() {
		c.mu.Lock()
		if cur := c.status[k]; cur != st || st.got || st.absent {
			c.mu.Unlock()
			return
		}
		st.absent = true
		st.timer = nil
		c.mu.Unlock()
		c.db.Update(db.Update{Known: []db.Key{{Type: k[0], Name: k[1], ParamsKey: db.AnyParams}}})
		c.schedule(k)
	})
}

// healthy is told when a channel's stream has proved itself: cache entries
// left lingering by interests that ended during the outage, and not taken
// up again since, are evicted now that the upstream can be asked afresh.
func (c *Client) healthy(ch *channel) {
	c.imu.Lock()
	defer c.imu.Unlock()
	c.mu.Lock()
	var gone []db.Sub
	var aliases []string
	for i, l := range c.lingering {
		if l.ch == ch {
			gone = append(gone, l.sub)
			aliases = append(aliases, l.alias)
			delete(c.lingering, i)
		}
	}
	c.mu.Unlock()
	for j, i := range gone {
		c.evict(ch, i, aliases[j])
	}
}

// channelState is told when a channel's stream comes up or goes down: the
// does-not-exist timers run only while connected, and watchers with an
// #alt= fallback reconsider.
func (c *Client) channelState(ch *channel, up bool) {
	c.mu.Lock()
	var keys [][2]string
	ch.mu.Lock()
	for u, t := range ch.types {
		for sk := range t.subs {
			keys = append(keys, [2]string{u, sk.name})
		}
	}
	ch.mu.Unlock()
	for _, k := range keys {
		st := c.status[k]
		if st == nil {
			continue
		}
		if up && !st.got && !st.absent && st.timer == nil {
			c.startTimerLocked(k, st)
		}
		if !up && st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
	}
	var alts []*watcher
	for _, ws := range c.watchers {
		for w := range ws {
			if w.alt != "" {
				alts = append(alts, w)
			}
		}
	}
	c.mu.Unlock()
	for _, w := range alts {
		c.scheduleWatcher(w)
		if !up {
			c.recheckAlt(w)
		}
	}
}

// recheckAlt looks at an #alt= watcher again once its primary may have been
// down for AltTimeout.
func (c *Client) recheckAlt(w *watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if c.altTimers == nil {
		c.altTimers = map[*time.Timer]struct{}{}
	}
	var tm *time.Timer
	tm = time.AfterFunc(c.o.AltTimeout+10*time.Millisecond, func() {
		c.mu.Lock()
		delete(c.altTimers, tm)
		c.mu.Unlock()
		c.scheduleWatcher(w)
	})
	c.altTimers[tm] = struct{}{}
}

// applied is told what a channel stored from a response: it updates the db
// and the resources' status, and wakes their watchers.
func (c *Client) applied(ch *channel, typeURL string, u db.Update, d *decoded) {
	if len(u.Puts)+len(u.Deletes)+len(u.Removes)+len(u.Known) > 0 {
		c.db.Update(u)
	}
	// Only now that the cache has it: an #alt= watcher returns to the
	// primary on this, and must not read what it replaced.
	ch.answeredNow(typeURL, d)
	var keys [][2]string
	c.mu.Lock()
	got := map[string]bool{}
	for _, v := range d.puts {
		k := [2]string{typeURL, v.Name}
		st := c.statusLocked(k)
		st.got, st.absent, st.err = true, false, ""
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		got[v.Name] = true
		keys = append(keys, k)
	}
	for alias, vh := range d.aliases {
		k := [2]string{typeURL, alias}
		st := c.statusLocked(k)
		st.alias, st.got, st.absent = vh, true, false
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		keys = append(keys, k)
	}
	for _, n := range append(append(append([]string(nil), d.removed...), d.notFound...), d.emptied...) {
		k := [2]string{typeURL, n}
		st := c.statusLocked(k)
		st.absent, st.alias = true, ""
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
		keys = append(keys, k)
	}
	keys = append(keys, c.unaliasLocked(typeURL, d)...)
	for _, g := range d.gone {
		keys = append(keys, [2]string{typeURL, g.Name})
	}
	for n, msg := range d.bad {
		if got[n] {
			continue
		}
		k := [2]string{typeURL, n}
		c.statusLocked(k).err = msg
		keys = append(keys, k)
	}
	// What nothing covers any more (an answer crossing an unsubscription,
	// a virtual host whose names are gone) leaves no status behind.
	for _, k := range keys {
		c.dropIdleLocked(k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.schedule(k)
	}
}

// unaliasLocked: on-demand VHDS names that resolved to a virtual host the
// response removed (a server removes one by its VirtualHost name,
// docs/protocol.md §5.4; or its TTL ran out) lose it: each is told the host
// is gone, and resolves afresh among the virtual hosts cached. It returns
// their keys, to wake their watchers. c.mu is held.
func (c *Client) unaliasLocked(typeURL string, d *decoded) [][2]string {
	if typeURL != resource.VirtualHostURL || len(d.removed)+len(d.emptied) == 0 {
		return nil
	}
	gone := make(map[string]bool, len(d.removed)+len(d.emptied))
	for _, n := range append(append([]string(nil), d.removed...), d.emptied...) {
		gone[n] = true
	}
	var keys [][2]string
	for k, st := range c.status {
		if k[0] == typeURL && st.alias != "" && gone[st.alias] {
			st.alias, st.absent = "", true
			keys = append(keys, k)
		}
	}
	return keys
}

// schedule wakes the watchers of a resource.
func (c *Client) schedule(k [2]string) {
	c.mu.Lock()
	ws := make([]*watcher, 0, len(c.watchers[k]))
	for w := range c.watchers[k] {
		ws = append(ws, w)
	}
	// A glob or wildcard watcher hears of its members through the db; its
	// collection's own status (an empty glob) comes here.
	c.mu.Unlock()
	for _, w := range ws {
		c.scheduleWatcher(w)
	}
}

func (c *Client) scheduleWatcher(w *watcher) {
	c.dmu.Lock()
	c.dirty[w] = struct{}{}
	c.dmu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// deliverLoop calls handlers, one at a time and in order, so a handler
// never runs concurrently with another.
func (c *Client) deliverLoop() {
	defer close(c.done)
	c.deliverG.Store(goroutineID())
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		c.dmu.Lock()
		ws := make([]*watcher, 0, len(c.dirty))
		for w := range c.dirty {
			ws = append(ws, w)
		}
		c.dirty = map[*watcher]struct{}{}
		c.dmu.Unlock()
		sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
		for _, w := range ws {
			select {
			case <-c.stop:
				return // closed, perhaps by the handler just called
			default:
			}
			// cancel waits on hmu for a delivery under way.
			w.hmu.Lock()
			w.deliver()
			w.hmu.Unlock()
		}
	}
}

// goroutineID is the calling goroutine's id, read from its stack trace's
// header ("goroutine 42 [running]:"). Go has no other way to tell a
// handler cancelling a watch on the delivery goroutine (which must not wait
// for itself) from any other goroutine (which must wait for the handler).
func goroutineID() uint64 {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

func (c *Client) statusOf(k [2]string) resStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.status[k]; st != nil {
		return *st
	}
	return resStatus{}
}

// Stats are a client's counters, for tests and diagnostics.
type Stats struct {
	Responses int64 // responses received
	Resources int64 // resources received (and accepted)
	NACKs     int64 // responses NACKed
	Connected int   // channels with a healthy stream
}

// Stats reports the client's counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	c.mu.Unlock()
	var s Stats
	for _, ch := range chans {
		ch.mu.Lock()
		s.Responses += ch.responses
		s.Resources += ch.received
		s.NACKs += ch.nackCount
		if ch.connected >= 0 && ch.healthy {
			s.Connected++
		}
		ch.mu.Unlock()
	}
	return s
}

// Upstream is one upstream stream as admin pages show it.
type Upstream struct {
	Servers []string `json:"servers"`
	// Connected is the server streaming, if any: its stream has answered,
	// or stayed open a while.
	Connected string `json:"connected,omitempty"`
	// Connecting is the server a stream is open to that has not yet proved
	// healthy (it may still fail at once, as a server that is not an xDS
	// server does).
	Connecting string `json:"connecting,omitempty"`
	// DownSince is when the last healthy stream ended (or the client
	// started), while none is.
	DownSince     string `json:"down_since,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	Subscriptions int    `json:"subscriptions"`
	Responses     int64  `json:"responses"`
	Resources     int64  `json:"resources"`
	NACKs         int64  `json:"nacks"`
}

// Upstreams reports each upstream stream: its servers, which one it is
// connected to, and its subscriptions and counters.
func (c *Client) Upstreams() []Upstream {
	c.mu.Lock()
	chans := make([]*channel, 0, len(c.channels))
	for _, ch := range c.channels {
		chans = append(chans, ch)
	}
	c.mu.Unlock()
	out := make([]Upstream, 0, len(chans))
	for _, ch := range chans {
		out = append(out, ch.upstream())
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Servers) < fmt.Sprint(out[j].Servers) })
	return out
}

// UpstreamFor reports the upstream stream serving a resource name: so a
// caller waiting for the name can tell a server that was never reached
// from a resource that does not exist.
func (c *Client) UpstreamFor(n string) (Upstream, error) {
	ch, err := c.route(n)
	if err != nil {
		return Upstream{}, err
	}
	return ch.upstream(), nil
}

func (ch *channel) upstream() Upstream {
	u := Upstream{}
	for _, s := range ch.servers {
		u.Servers = append(u.Servers, s.URI)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	switch {
	case ch.connected >= 0 && ch.healthy:
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

// authorityUp reports whether the channel for a name has a healthy stream,
// and since when it has not. (A server failing every stream at once is
// down, however often its streams open.)
func (c *Client) authorityUp(n string) (bool, time.Duration) {
	ch, err := c.route(n)
	if err != nil {
		return false, 0
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.connected >= 0 && ch.healthy {
		return true, 0
	}
	return false, time.Since(ch.downSince)
}

// redirectTarget reads a TP1 redirect's target.
func redirectTarget(v *resource.Variant) (string, error) {
	m, err := v.Message()
	if err != nil {
		return "", err
	}
	l, ok := m.(*xdscorev3.ResourceLocator)
	if !ok {
		return "", fmt.Errorf("redirect payload is a %T", m)
	}
	n, err := name.FromLocator(l)
	if err != nil {
		return "", err
	}
	return n.URN().String(), nil
}
