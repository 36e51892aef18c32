package clientcore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// watcher is one watch. Its delivery state is the handler goroutine's.
type watcher struct {
	c      *Client
	typ    string
	name   string // canonical: a URN, a glob URL, "*", or a VHDS "<rc>/<host>"
	kind   db.Kind
	params constraint.Params // nil: no dynamic parameters configured
	entry  string            // #entry=: deliver this inline entry of the collection
	alt    string            // #alt=: the fallback URN
	h      Handler
	sub    *db.Subscriber

	queued    atomic.Bool // a delivery is scheduled
	cancelled atomic.Bool
	once      sync.Once
	done      <-chan struct{} // the CancelFunc's channel

	// The rest is the handler goroutine's. subscribed is what the watcher
	// holds in the db: the watched name, redirect targets, the #alt= URL.
	subscribed map[string]bool
	last       *resource.Variant
	lastErr    string
	toldAbsent bool
	members    map[string]*resource.Variant
	memberErrs map[string]string // glob members whose redirects fail
	usingAlt   bool
}

// Watch is client.Client's Watch, which documents it.
func (c *Client) Watch(ctx context.Context, typeURL, n string, h Handler) (cancel CancelFunc, err error) {
	if err := resource.CheckConfiguredName(n); err != nil {
		return nil, err
	}
	return c.watch(ctx, typeURL, n, h)
}

// WatchComputed is client.Client's WatchComputed, which documents it.
func (c *Client) WatchComputed(ctx context.Context, typeURL, n string, attrs map[string]string, h Handler) (cancel CancelFunc, err error) {
	if err := resource.CheckConfiguredName(n); err != nil {
		return nil, err
	}
	u, err := name.Parse(n)
	if err != nil {
		return nil, err
	}
	if !u.IsXDSTP() {
		return nil, fmt.Errorf("%s: computed attributes are context parameters of an xdstp:// name; a legacy name has none", n)
	}
	ps := make([]name.Param, 0, len(attrs))
	for k, v := range attrs {
		if k == "" || strings.ContainsAny(k, "&=#?") {
			return nil, fmt.Errorf("computed attribute %q: want a key such as vip", k)
		}
		ps = append(ps, name.Param{Key: resource.ComputedPrefix + k, Value: v})
	}
	return c.watch(ctx, typeURL, u.WithParams(ps...).String(), h)
}

// watch is Watch without the check of a configured name: names a server
// sent (a list collection's entries) may carry what clients computed.
func (c *Client) watch(ctx context.Context, typeURL, n string, h Handler) (cancel CancelFunc, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watcher{c: c, typ: typeURL, h: h, subscribed: map[string]bool{}}
	w.sub = db.NewSubscriber(w.wake)
	authority, legacy := "", true
	if n == db.Wildcard {
		w.name, w.kind = n, db.AllOfType
	} else {
		u, err := name.Parse(n)
		if err != nil {
			return nil, err
		}
		if u.IsXDSTP() {
			authority, legacy = u.Authority, false
			if u.Type != resource.ForURL(typeURL).Name {
				return nil, fmt.Errorf("%s names a %s, not a %s", n, u.Type, resource.ForURL(typeURL).Name)
			}
			if u.Alt != nil {
				if u.Glob {
					return nil, fmt.Errorf("%s: #alt= on a glob collection is not supported", n)
				}
				if u.Alt.Type != u.Type {
					return nil, fmt.Errorf("%s: its #alt= names a %s", n, u.Alt.Type)
				}
				w.alt = u.Alt.URN().String()
			}
			w.entry = u.Entry
		}
		s := db.NewSub(typeURL, n, nil)
		w.name, w.kind = s.Name, s.Kind
	}
	if params, configured := c.b.ParamsFor(authority, legacy); configured {
		w.params = constraint.Params(params)
	}
	// The channel is made now, so that its servers' credentials are
	// checked here.
	if err := c.routeNow(w.name); err != nil {
		return nil, err
	}
	if w.alt != "" {
		if err := c.routeNow(w.alt); err != nil {
			return nil, fmt.Errorf("%s: #alt=: %w", n, err)
		}
	}
	if w.kind == db.Glob || w.kind == db.VHDS {
		if servers, _ := c.serversFor(w.name); !servers[0].Delta() {
			return nil, fmt.Errorf("%s: glob collections and on-demand VHDS need a delta server", n)
		}
	}
	// Subscribed here, on the caller's goroutine, so that the upstream
	// subscription starts before Watch returns; from here on the watcher
	// is the handler goroutine's.
	w.subscribed[w.name] = true
	c.db.Subscribe(w.sub, w.subFor(w.name))
	if !c.handlers.Schedule(w.start) {
		c.db.Unsubscribe(w.sub, w.subFor(w.name))
		return nil, errClosed
	}
	stop := context.AfterFunc(ctx, func() { w.cancel() })
	return func() <-chan struct{} {
		stop()
		return w.cancel()
	}, nil
}

func (w *watcher) subFor(n string) db.Sub { return db.NewSub(w.typ, n, w.params) }

// wake schedules a delivery, unless one is scheduled already. The db and
// the state goroutine call it, from any goroutine.
func (w *watcher) wake() {
	if w.queued.CompareAndSwap(false, true) && !w.c.handlers.Schedule(w.run) {
		w.queued.Store(false)
	}
}

func (w *watcher) run() {
	w.queued.Store(false)
	w.deliver()
}

// start files the watcher under what it subscribed, and delivers what is
// cached.
func (w *watcher) start() {
	for n := range w.subscribed {
		w.c.fileWatcher(w, n, true)
	}
	if w.alt != "" {
		w.c.alts[w] = struct{}{}
		w.c.recheckAlt(w)
	}
	w.run()
}

// follow subscribes the watcher to a name (a redirect target, the alt URL)
// and files it under that name for status changes.
func (w *watcher) follow(n string) {
	if w.subscribed[n] || w.cancelled.Load() {
		return
	}
	w.subscribed[n] = true
	w.c.fileWatcher(w, n, true)
	w.c.db.Subscribe(w.sub, w.subFor(n))
}

func (w *watcher) unfollow(n string) {
	if !w.subscribed[n] {
		return
	}
	delete(w.subscribed, n)
	w.c.fileWatcher(w, n, false)
	w.c.db.Unsubscribe(w.sub, w.subFor(n))
}

// fileWatcher files (or unfiles) w under a name it follows, for status
// changes.
func (c *Client) fileWatcher(w *watcher, n string, on bool) {
	k := db.Key{Type: w.typ, Name: n}
	if on {
		if c.watchers[k] == nil {
			c.watchers[k] = map[*watcher]struct{}{}
		}
		c.watchers[k][w] = struct{}{}
		return
	}
	delete(c.watchers[k], w)
	if len(c.watchers[k]) == 0 {
		delete(c.watchers, k)
	}
}

// wake wakes the watchers of resources whose status changed.
func (c *Client) wake(keys []db.Key) {
	for _, k := range keys {
		for w := range c.watchers[k] {
			w.wake()
		}
	}
}

// cancel ends the watch: no handler call starts once it is marked
// cancelled, and its subscriptions end on the handler goroutine, after the
// call under way if any.
func (w *watcher) cancel() <-chan struct{} {
	w.once.Do(func() {
		w.cancelled.Store(true)
		done := make(chan struct{})
		if w.c.handlers.Schedule(func() { w.stop(); close(done) }) {
			w.done = done
		} else {
			w.done = w.c.handlers.Done() // closed: nothing is called once it has ended
		}
	})
	return w.done
}

// stop ends the watcher's subscriptions.
func (w *watcher) stop() {
	if w.usingAlt {
		w.usingAlt = false
		w.needFresh(-1)
	}
	for n := range w.subscribed {
		w.unfollow(n)
	}
	delete(w.c.alts, w)
}

func (w *watcher) emit(e clientdata.Event) {
	if w.cancelled.Load() {
		return
	}
	e.Type = w.typ
	if e.Name == "" {
		e.Name = w.name
	}
	w.c.call(func() { w.h(e) })
}

// call calls a handler, unless the client is closing. inHandler tells
// Close that a call is under way (perhaps its caller's), so that it does
// not wait for the handler goroutine; set before closing is read, it also
// keeps a call from starting once Close has looked.
func (c *Client) call(f func()) {
	c.inHandler.Store(true)
	defer c.inHandler.Store(false)
	if c.closing.Load() {
		return
	}
	f()
}

// pick chooses the variant for this watcher among a resource's variants:
// the one its parameters match. A watcher without dynamic parameters gets
// whatever the server chose for it (by node metadata, docs/architecture.md §4.5): the
// one variant held.
func (w *watcher) pick(vs []*resource.Variant) *resource.Variant {
	if w.params != nil {
		for _, v := range vs {
			if v.Constraints.Match(w.params) {
				return v
			}
		}
		return nil
	}
	for _, v := range vs {
		if v.Constraints.Match(nil) {
			return v
		}
	}
	if len(vs) > 0 {
		return vs[0]
	}
	return nil
}

func (w *watcher) read(n string) *resource.Variant {
	var v *resource.Variant
	w.c.db.Read(func(r *db.Reader) {
		v = w.pick(r.Variants(w.typ, n))
		if v != nil || w.kind != db.VHDS {
			return
		}
		// On-demand VHDS: the server answered the requested name with the
		// virtual host it resolved to; or another request cached one whose
		// domains match.
		if st := w.c.view(w.typ, n); st.alias != "" {
			v = w.pick(r.Variants(w.typ, st.alias))
			return
		}
		v = r.ResolveVirtualHost(n, w.params)
	})
	return v
}

// resolve follows redirects (TP1) from start, whose variant is v: a
// bounded chain without loops. It subscribes the targets, adds the names
// on the path to chain, and returns the variant reached (nil on error), its
// name, and via with the targets appended.
func (w *watcher) resolve(start string, v *resource.Variant, via []string, chain map[string]bool) (*resource.Variant, string, []string, error) {
	cur := start
	chain[start] = true
	seen := map[string]bool{start: true}
	for v != nil && v.IsRedirect() {
		next, err := w.redirectTarget(v)
		switch {
		case err != nil:
			return nil, cur, via, fmt.Errorf("redirect at %s: %v", cur, err)
		case seen[next]:
			return nil, cur, via, fmt.Errorf("redirect loop at %s", next)
		case len(seen) > w.c.o.MaxRedirects:
			return nil, cur, via, fmt.Errorf("more than %d redirects", w.c.o.MaxRedirects)
		}
		seen[next], chain[next] = true, true
		via = append(via, next)
		w.follow(next)
		cur = next
		v = w.read(cur)
	}
	return v, cur, via, nil
}

// letGo unsubscribes the redirect targets no longer on any path.
func (w *watcher) letGo(keep map[string]bool) {
	for n := range w.subscribed {
		if !keep[n] && n != w.name && n != w.alt {
			w.unfollow(n)
		}
	}
}

// redirectTarget reads a TP1 redirect's target, which must be of the
// watched type and in an authority the client can reach (a name the client
// cannot route is not subscribed).
func (w *watcher) redirectTarget(v *resource.Variant) (string, error) {
	next, err := redirectTarget(v)
	if err != nil {
		return "", err
	}
	u, err := name.ParseURN(next)
	if err != nil {
		return "", err
	}
	if want := resource.ForURL(w.typ).Name; u.Type != want {
		return "", fmt.Errorf("its target %s is a %s, not a %s", next, u.Type, want)
	}
	if err := w.c.routeNow(next); err != nil {
		return "", fmt.Errorf("its target %s: %v", next, err)
	}
	return next, nil
}

// sameVariant: an entry built from a collection is made anew each time, so
// compare content, not pointers.
func sameVariant(a, b *resource.Variant) bool {
	if a == b {
		return true
	}
	return a != nil && b != nil && a.Name == b.Name && a.Version == b.Version && a.SameContent(b)
}

// chooseAlt decides between a name and its #alt= fallback: the alt is
// fetched once the primary authority has been unreachable for AltTimeout,
// and dropped once the primary is back and has answered for the name on
// its new stream — what the cache held of it from before may be stale.
func (w *watcher) chooseAlt() (string, []string) {
	var up, answered bool
	var down time.Duration
	w.c.state.Do(func() {
		ch, err := w.c.route(w.name)
		if err != nil {
			return
		}
		if up = ch.up(); !up {
			down = time.Since(ch.downSince)
		}
		answered = ch.hasAnswered(w.typ, w.name)
	})
	switch {
	case !w.usingAlt && !up && down >= w.c.o.AltTimeout:
		w.usingAlt = true
		w.needFresh(1)
		w.follow(w.alt)
	case w.usingAlt && up && answered:
		w.usingAlt = false
		w.needFresh(-1)
		w.unfollow(w.alt)
	}
	if w.usingAlt {
		return w.alt, []string{w.alt}
	}
	return w.name, nil
}

// needFresh tells the primary's channel that this watcher needs (1) or no
// longer needs (-1) the primary's fresh word on its name.
func (w *watcher) needFresh(add int) {
	w.c.state.Schedule(func() {
		if ch, err := w.c.route(w.name); err == nil {
			ch.needFresh(w.typ, w.name, add)
		}
	})
}

// recheckAlt looks at an #alt= watcher again once its primary may have been
// down for AltTimeout.
func (c *Client) recheckAlt(w *watcher) {
	if c.closing.Load() {
		return
	}
	var tm *time.Timer
	tm = time.AfterFunc(c.o.AltTimeout+10*time.Millisecond, func() {
		c.handlers.Schedule(func() {
			delete(c.altTimers, tm)
			w.wake()
		})
	})
	c.altTimers[tm] = struct{}{}
}

// altsReconsider has the #alt= watchers look again as a stream comes up or
// goes down.
func (c *Client) altsReconsider(up bool) {
	for w := range c.alts {
		w.wake()
		if !up {
			c.recheckAlt(w)
		}
	}
}

func (c *Client) stopAltTimers() {
	for tm := range c.altTimers {
		tm.Stop()
	}
	clear(c.altTimers)
}

// inlineEntry resolves #entry= against a list collection: the inline entry
// of that name, as a variant of the collection's element type.
func inlineEntry(coll *resource.Variant, entry string) (*resource.Variant, error) {
	elem := coll.Type.Element
	if elem == nil {
		return nil, fmt.Errorf("#entry=%s on %s, which is not a list collection", entry, coll.Type.Name)
	}
	entries, err := resource.CollectionEntries(coll.Body())
	if err != nil {
		return nil, fmt.Errorf("%s: %v", coll.Name, err)
	}
	for _, e := range entries {
		ie := e.GetInlineEntry()
		if ie == nil || ie.GetName() != entry {
			continue
		}
		a := ie.GetResource()
		if a.GetTypeUrl() != elem.URL {
			return nil, fmt.Errorf("%s#entry=%s holds a %s", coll.Name, entry, a.GetTypeUrl())
		}
		version := ie.GetVersion()
		if version == "" {
			version = coll.Version
		}
		return resource.NewVariant(elem, coll.Name+"#entry="+entry, coll.Constraints, version, a.GetTypeUrl(), a.GetValue()), nil
	}
	return nil, fmt.Errorf("%s has no inline entry %q", coll.Name, entry)
}
