package clientcore

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Client is an xDS client, the engine behind package client's Client: it
// subscribes to resources of any type from the servers of their
// authorities and caches them.
//
// Its state has two owners, each a goroutine that runs callbacks one at a
// time (a serializer, as in grpc-go's xDS client), so none of it is
// guarded by a lock. The state goroutine owns the upstream side and the
// cache's bookkeeping: the channels (one per server list) with their
// subscriptions, what they hold, TTL timers and requests due; the
// resources' statuses and does-not-exist timers; what lingers through an
// outage. The db's interest hooks, the streams' goroutines and timers hand
// it their work and wait for it where they must. The handler goroutine
// owns the watchers: their subscriptions in the db, what each was last
// told, #alt= choices, and it calls the handlers. The cache's contents are
// in the db, which has its own lock. No user code runs on the state
// goroutine: Options.Validate runs on a stream's receiving goroutine,
// handlers on the handler goroutine.
type Client struct {
	b      *clientdata.Bootstrap
	o      clientdata.Options
	policy cachepolicy.Policy
	db     *db.DB

	state    *serializer // runs the state goroutine
	handlers *serializer // runs the handler goroutine

	// Owned by the state goroutine.
	channels map[string]*channel
	status   map[db.Key]*resStatus // by type and name
	// lingering are ended interests whose cache entries outlive them
	// because their upstream is down: a subscriber arriving meanwhile (a
	// client restarted during the outage) is served from the cache. They
	// are evicted once the upstream is healthy again.
	lingering map[db.Key]linger
	// kept are upstream subscriptions with no subscriber left, kept for
	// Policy.Linger (a relay's --cache-linger) by a timer that ends them.
	kept    map[db.Key]*time.Timer
	touched map[db.Key]struct{} // statuses changed by the running callback
	closed  bool

	// views are the statuses as watchers see them: written by the state
	// goroutine as statuses change, read by the handler goroutine.
	views sync.Map // db.Key → statusView

	// Owned by the handler goroutine.
	watchers  map[db.Key]map[*watcher]struct{} // by type and name watched or followed
	alts      map[*watcher]struct{}            // watchers with an #alt= fallback
	altTimers map[*time.Timer]struct{}         // pending #alt= rechecks

	closing   atomic.Bool   // Close has begun: no handler call starts
	inHandler atomic.Bool   // a handler call is under way
	closeDone chan struct{} // closed when the first Close is through
}

// New starts a client under a cache policy: the zero Policy for package
// client's New, the relay's for its cache. Close it when done.
func New(b *clientdata.Bootstrap, o clientdata.Options, p cachepolicy.Policy) (*Client, error) {
	if b == nil || len(b.Servers) == 0 {
		return nil, errors.New("client: a bootstrap with at least one server is needed")
	}
	if o.DoesNotExistTimeout == 0 {
		o.DoesNotExistTimeout = 15 * time.Second
	}
	if p.NeverTimeOut {
		o.DoesNotExistTimeout = -1
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
	c := &Client{b: b, o: o, policy: p,
		channels: map[string]*channel{}, status: map[db.Key]*resStatus{}, lingering: map[db.Key]linger{}, kept: map[db.Key]*time.Timer{}, touched: map[db.Key]struct{}{},
		watchers: map[db.Key]map[*watcher]struct{}{}, alts: map[*watcher]struct{}{}, altTimers: map[*time.Timer]struct{}{},
		closeDone: make(chan struct{})}
	c.state = newSerializer(c.publish)
	c.handlers = newSerializer(nil)
	c.db = db.NewCache(db.Hooks{Interest: c.interest, Subscribed: c.subscribed})
	return c, nil
}

// Close is client.Client's Close, which documents it.
func (c *Client) Close() {
	if c.closing.CompareAndSwap(false, true) {
		var chans []*channel
		c.state.Do(func() {
			c.closed = true
			for _, ch := range c.channels {
				chans = append(chans, ch)
				ch.stopTimers()
			}
			for _, st := range c.status {
				if st.timer != nil {
					st.timer.Stop()
					st.timer = nil
				}
			}
			for k, tm := range c.kept {
				tm.Stop()
				delete(c.kept, k)
			}
		})
		for _, ch := range chans {
			ch.stop()
		}
		c.state.Close()
		<-c.state.Done()
		c.handlers.Schedule(c.stopAltTimers)
		c.handlers.Close()
		close(c.closeDone)
	}
	<-c.closeDone
	if !c.inHandler.Load() {
		// (If a handler started after this load, it saw closing set and
		// called nothing: see emit.)
		<-c.handlers.Done()
	}
}

// DB is the client's cache: what the relay's protocol engine serves, and
// what tests look into.
func (c *Client) DB() *db.DB { return c.db }

// Settle waits until the client has done what was handed to it so far:
// the state goroutine's work, the handler goroutine's (deliveries, the
// ends of cancelled watches), and what those handed on. It is for tests.
func (c *Client) Settle() {
	for range 2 {
		c.state.Do(func() {})
		c.handlers.Do(func() {})
	}
}

// serversFor is the server list that serves a resource name: by its
// authority for an xdstp:// name (federation), the top-level servers for a
// legacy name (or, with Policy.AnyAuthority, for an authority the
// bootstrap does not list).
func (c *Client) serversFor(n string) ([]clientdata.ServerConfig, error) {
	authority, legacy := "", true
	if u, err := name.Parse(n); err == nil && u.IsXDSTP() {
		authority, legacy = u.Authority, false
	}
	servers, err := c.b.ServersFor(authority, legacy)
	if err != nil && c.policy.AnyAuthority {
		servers, err = c.b.ServersFor("", true)
	}
	return servers, err
}

// route finds (or makes) the channel serving a resource name; state
// goroutine.
func (c *Client) route(n string) (*channel, error) {
	servers, err := c.serversFor(n)
	if err != nil {
		return nil, err
	}
	if c.closed {
		return nil, errClosed
	}
	var key string
	for _, s := range servers {
		key += s.Key() + "\x00"
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

// routeNow is route from any goroutine but the state one.
func (c *Client) routeNow(n string) error {
	err := errClosed
	c.state.Do(func() { _, err = c.route(n) })
	return err
}

// Stats is client.Client's Stats, which documents it.
func (c *Client) Stats() clientdata.Stats {
	var s clientdata.Stats
	c.state.Do(func() {
		for _, ch := range c.channels {
			s.Responses += ch.responses
			s.Resources += ch.received
			s.NACKs += ch.nackCount
			if ch.up() {
				s.Connected++
			}
		}
	})
	return s
}

// Upstreams is client.Client's Upstreams, which documents it.
func (c *Client) Upstreams() []clientdata.Upstream {
	var out []clientdata.Upstream
	c.state.Do(func() {
		for _, ch := range c.channels {
			out = append(out, ch.upstream())
		}
	})
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Servers) < fmt.Sprint(out[j].Servers) })
	return out
}

// UpstreamFor is client.Client's UpstreamFor, which documents it.
func (c *Client) UpstreamFor(n string) (clientdata.Upstream, error) {
	var u clientdata.Upstream
	err := errClosed
	c.state.Do(func() {
		var ch *channel
		if ch, err = c.route(n); err == nil {
			u = ch.upstream()
		}
	})
	return u, err
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
