package client

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// DoesNotExistTimeout is how long a subscribed resource may go
	// unanswered on a connected stream before watchers are told it does not
	// exist (SotW has no such signal; PROTOCOL.md §1.8). Default 15s.
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
	// good value.
	Validate func(v *resource.Variant, m proto.Message) error
	// DialOptions are added to every server connection.
	DialOptions []grpc.DialOption
	// Locators sends every subscription as a TP2 resource locator, even
	// with no parameters (a relay uses it, so its downstream clients'
	// parameters, not its own node, select variants upstream).
	Locators bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Client is an xDS client: it subscribes to resources of any type from the
// servers of their authorities and caches them in a db.
type Client struct {
	b  *Bootstrap
	o  Options
	db *db.DB

	mu       sync.Mutex
	channels map[string]*channel
	status   map[[2]string]*resStatus
	watchers map[[2]string]map[*watcher]struct{} // by (type, name) watched or followed
	closed   bool
	nextID   uint64

	dmu   sync.Mutex // guards dirty
	dirty map[*watcher]struct{}
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
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
	if o.DoesNotExistTimeout <= 0 {
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
	c := &Client{b: b, o: o, channels: map[string]*channel{}, status: map[[2]string]*resStatus{},
		watchers: map[[2]string]map[*watcher]struct{}{}, dirty: map[*watcher]struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.db = db.New(db.Hooks{Interest: c.interest})
	go c.deliverLoop()
	return c, nil
}

// DB is the client's cache: what a relay serves downstream.
func (c *Client) DB() *db.DB { return c.db }

// Close stops every stream and watcher.
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
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
	c.mu.Unlock()
	for _, ch := range chans {
		ch.close()
	}
	close(c.stop)
	<-c.done
}

// route finds the channel serving a resource name: by its authority for an
// xdstp:// name (federation), the top-level servers for a legacy name.
func (c *Client) route(n string) (*channel, error) {
	authority, legacy := "", true
	if u, err := name.Parse(n); err == nil && u.IsXDSTP() {
		authority, legacy = u.Authority, false
	}
	servers, err := c.b.ServersFor(authority, legacy)
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
func (c *Client) interest(i db.Interest, on bool) {
	ch, err := c.route(i.Name)
	k := [2]string{i.Type, i.Name}
	if err != nil {
		c.mu.Lock()
		st := c.statusLocked(k)
		st.err = err.Error()
		c.mu.Unlock()
		c.schedule(k)
		return
	}
	if !on {
		ch.unsubscribe(i.Type, i.Name, i.Params)
		c.mu.Lock()
		st := c.status[k]
		last := false
		if st != nil {
			if st.interest--; st.interest <= 0 {
				last = true
				if st.timer != nil {
					st.timer.Stop()
				}
				delete(c.status, k)
			}
		}
		c.mu.Unlock()
		if last && i.Name != db.Wildcard {
			// TP2: a cache entry goes when its last subscription does.
			c.db.Update(db.Update{Removes: [][2]string{{i.Type, i.Name}}})
		}
		return
	}
	params, _ := constraint.ParseParams(i.Params)
	s := &upSub{name: i.Name, params: params, pkey: i.Params, tp2: i.Params != "" || c.o.Locators}
	c.mu.Lock()
	st := c.statusLocked(k)
	st.interest++
	if !st.got && !st.absent && st.timer == nil && ch.isConnected() {
		c.startTimerLocked(k, st)
	}
	c.mu.Unlock()
	ch.subscribe(i.Type, s)
}

func (c *Client) statusLocked(k [2]string) *resStatus {
	st := c.status[k]
	if st == nil {
		st = &resStatus{}
		c.status[k] = st
	}
	return st
}

// startTimerLocked arms the does-not-exist timer (PROTOCOL.md §1.8).
func (c *Client) startTimerLocked(k [2]string, st *resStatus) {
	if k[1] == db.Wildcard {
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
		c.schedule(k)
	})
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
			// Look again once the primary has been down long enough.
			time.AfterFunc(c.o.AltTimeout+10*time.Millisecond, func() { c.scheduleWatcher(w) })
		}
	}
}

// applied is told what a channel stored from a response: it updates the db
// and the resources' status, and wakes their watchers.
func (c *Client) applied(typeURL string, u db.Update, d *decoded) {
	if len(u.Puts)+len(u.Deletes)+len(u.Removes) > 0 {
		c.db.Update(u)
	}
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
	c.mu.Unlock()
	for _, k := range keys {
		c.schedule(k)
	}
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
			w.deliver()
		}
	}
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
	Connected int   // channels with a stream up
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
		if ch.connected >= 0 {
			s.Connected++
		}
		ch.mu.Unlock()
	}
	return s
}

// authorityUp reports whether the channel for a name is connected, and
// since when it has been down.
func (c *Client) authorityUp(n string) (bool, time.Duration) {
	ch, err := c.route(n)
	if err != nil {
		return false, 0
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.connected >= 0 {
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
