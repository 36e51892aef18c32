package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// EventKind says what happened to a watched resource.
type EventKind int

// The kinds of events.
const (
	// Updated: the resource arrived or changed.
	Updated EventKind = iota + 1
	// Removed: the server deleted a resource the watcher had.
	Removed
	// DoesNotExist: the server says the resource does not exist, or it did
	// not come within Options.DoesNotExistTimeout.
	DoesNotExist
	// Errored: the resource was rejected (and NACKed), or cannot be fetched;
	// Variant holds the last good value, if any.
	Errored
)

func (k EventKind) String() string {
	switch k {
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	case DoesNotExist:
		return "does-not-exist"
	case Errored:
		return "error"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what a watcher is told.
type Event struct {
	Kind EventKind
	// Type is the type URL watched.
	Type string
	// Name is the name watched; for a glob or wildcard watch, the member.
	Name string
	// Variant is the resource (Updated), or the last good one (Errored).
	Variant *resource.Variant
	// Err says why (Errored).
	Err error
	// Via lists the names followed to reach Variant: TP1 redirects, or the
	// #alt= URL while the primary authority is unreachable.
	Via []string
}

// Message decodes the event's resource.
func (e Event) Message() (proto.Message, error) {
	if e.Variant == nil {
		return nil, errors.New("no resource")
	}
	return e.Variant.Message()
}

// Handler receives a watcher's events. Handlers are called one at a time, in
// order, on the client's delivery goroutine; they must not block for long.
// A handler may start and cancel watches, and may Close the client.
type Handler func(Event)

type watchKind int

const (
	kindNamed watchKind = iota
	kindGlob
	kindWildcard
	kindVHDS
)

type watcher struct {
	c      *Client
	id     uint64
	typ    string
	name   string // canonical: a URN, a glob URL, "*", or a VHDS "<rc>/<host>"
	kind   watchKind
	params constraint.Params // nil: no dynamic parameters configured
	entry  string            // #entry=: deliver this inline entry of the collection
	alt    string            // #alt=: the fallback URN
	h      Handler
	sub    *db.Subscriber

	cancelled atomic.Bool
	// hmu is held while the watcher is delivered, so that cancel can wait
	// for a handler under way.
	hmu sync.Mutex

	// subscribed is what the watcher holds in the db; follow and unfollow
	// run on the delivery goroutine, cancel on any.
	subMu      sync.Mutex
	subscribed map[string]bool

	// Delivery state, used only on the delivery goroutine.
	last       *resource.Variant
	lastErr    string
	toldAbsent bool
	members    map[string]*resource.Variant
	memberErrs map[string]string // glob members whose redirects fail
	usingAlt   bool
}

// Watch subscribes to a resource of any type and calls h with every change.
// name may be a legacy name, an xdstp:// URN, a glob collection URL
// (".../*", delta only), "*" (every resource of the type), a VHDS
// "<route config>/<host>", and may carry #alt= (fetched while the name's
// authority is unreachable) and, on a list collection, #entry= (deliver that
// inline entry). A watcher is told the cached value at once if there is
// one.
//
// cancel, or the end of ctx, stops the watch; the last watcher of a
// resource unsubscribes it upstream. Once cancel returns, h is not called
// again: cancel waits for a call of h under way — unless it is called from
// a handler, which may cancel its own watch or another. So do not call
// cancel while holding a lock h takes.
func (c *Client) Watch(ctx context.Context, typeURL, n string, h Handler) (cancel func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watcher{c: c, typ: typeURL, h: h, subscribed: map[string]bool{}}
	w.sub = db.NewSubscriber(func() { c.scheduleWatcher(w) })
	authority, legacy := "", true
	switch {
	case n == db.Wildcard:
		w.name, w.kind = n, kindWildcard
	default:
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
			w.name = u.URN().String()
			if u.Glob {
				w.kind = kindGlob
			}
		} else {
			w.name = n
		}
		if w.kind == kindNamed && typeURL == resource.VirtualHostURL && strings.Contains(w.name, "/") {
			w.kind = kindVHDS
		}
	}
	if params, configured := c.b.ParamsFor(authority, legacy); configured {
		w.params = constraint.Params(params)
	}
	ch, err := c.route(w.name)
	if err != nil {
		return nil, err
	}
	if w.alt != "" {
		if _, err := c.route(w.alt); err != nil {
			return nil, fmt.Errorf("%s: #alt=: %w", n, err)
		}
	}
	if (w.kind == kindGlob || w.kind == kindVHDS) && !ch.servers[0].Delta() {
		return nil, fmt.Errorf("%s: glob collections and on-demand VHDS need a delta server", n)
	}
	c.mu.Lock()
	c.nextID++
	w.id = c.nextID
	c.mu.Unlock()
	w.follow(w.name)
	if w.alt != "" {
		c.recheckAlt(w)
	}
	c.scheduleWatcher(w)
	stop := context.AfterFunc(ctx, w.cancel)
	return func() {
		stop()
		w.cancel()
	}, nil
}

// follow subscribes the watcher to a name (the watched one, a redirect
// target, the alt URL) and files it under that name for status changes.
func (w *watcher) follow(n string) {
	w.subMu.Lock()
	defer w.subMu.Unlock()
	if w.subscribed[n] || w.cancelled.Load() {
		return
	}
	w.subscribed[n] = true
	k := [2]string{w.typ, n}
	w.c.mu.Lock()
	if w.c.watchers[k] == nil {
		w.c.watchers[k] = map[*watcher]struct{}{}
	}
	w.c.watchers[k][w] = struct{}{}
	w.c.mu.Unlock()
	w.c.db.Subscribe(w.sub, db.NewSub(w.typ, n, w.params))
}

func (w *watcher) unfollow(n string) {
	w.subMu.Lock()
	defer w.subMu.Unlock()
	w.unfollowLocked(n)
}

func (w *watcher) unfollowLocked(n string) {
	if !w.subscribed[n] {
		return
	}
	delete(w.subscribed, n)
	k := [2]string{w.typ, n}
	w.c.mu.Lock()
	delete(w.c.watchers[k], w)
	if len(w.c.watchers[k]) == 0 {
		delete(w.c.watchers, k)
	}
	w.c.mu.Unlock()
	w.c.db.Unsubscribe(w.sub, db.NewSub(w.typ, n, w.params))
}

// cancel ends the watch: once it returns, the handler is not called again.
// A handler running on the delivery goroutine is waited for, unless that
// handler is the caller (a handler may cancel its own watch, or another).
func (w *watcher) cancel() {
	first := !w.cancelled.Swap(true)
	// Every call waits (a second one may race the first, from ctx).
	if goroutineID() != w.c.deliverG.Load() {
		w.hmu.Lock()
		//lint:ignore SA2001 an empty critical section: waiting for a delivery under way is the point
		w.hmu.Unlock()
	}
	if !first {
		return
	}
	if w.usingAlt {
		// No delivery runs now (or it is the caller's).
		w.usingAlt = false
		w.needFresh(-1)
	}
	w.subMu.Lock()
	defer w.subMu.Unlock()
	for n := range w.subscribed {
		w.unfollowLocked(n)
	}
}

func (w *watcher) emit(e Event) {
	// (Closed: a handler of this delivery may have closed the client, and
	// no handler is called once it returns.)
	if w.cancelled.Load() || w.c.stopped() {
		return
	}
	e.Type = w.typ
	if e.Name == "" {
		e.Name = w.name
	}
	w.h(e)
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
		if v != nil || w.kind != kindVHDS {
			return
		}
		// On-demand VHDS: the server answered the requested name with the
		// virtual host it resolved to; or another request cached one whose
		// domains match.
		if st := w.c.statusOf([2]string{w.typ, n}); st.alias != "" {
			v = w.pick(r.Variants(w.typ, st.alias))
			return
		}
		v = r.ResolveVirtualHost(n, w.params)
	})
	return v
}

func (w *watcher) deliver() {
	if w.cancelled.Load() {
		return
	}
	if w.kind == kindGlob || w.kind == kindWildcard {
		w.deliverMembers()
		return
	}
	target := w.name
	var via []string
	if w.alt != "" {
		target, via = w.chooseAlt()
	}
	chain := map[string]bool{}
	v, cur, via, ferr := w.resolve(target, w.read(target), via, chain)
	w.letGo(chain)
	if ferr != nil {
		if ferr.Error() != w.lastErr {
			w.lastErr = ferr.Error()
			w.emit(Event{Kind: Errored, Err: ferr, Variant: w.last, Via: via})
		}
		return
	}
	if v != nil && w.entry != "" {
		var err error
		if v, err = inlineEntry(v, w.entry); err != nil {
			// Once: the collection's other entries may change meanwhile.
			if err.Error() != w.lastErr {
				w.lastErr = err.Error()
				w.emit(Event{Kind: Errored, Err: err, Variant: w.last, Via: via})
			}
			return
		}
	}
	st := w.c.statusOf([2]string{w.typ, cur})
	switch {
	case v != nil:
		if !sameVariant(v, w.last) {
			w.last, w.toldAbsent = v, false
			w.emit(Event{Kind: Updated, Variant: v, Via: via})
		}
	case st.absent:
		if w.last != nil {
			w.last = nil
			w.toldAbsent = true
			w.emit(Event{Kind: Removed, Via: via})
		} else if !w.toldAbsent {
			w.toldAbsent = true
			w.emit(Event{Kind: DoesNotExist, Via: via})
		}
	}
	if st.err != w.lastErr {
		w.lastErr = st.err
		if st.err != "" {
			w.emit(Event{Kind: Errored, Err: errors.New(st.err), Variant: w.last, Via: via})
		}
	}
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
	w.subMu.Lock()
	defer w.subMu.Unlock()
	for n := range w.subscribed {
		if !keep[n] && n != w.name && n != w.alt {
			w.unfollowLocked(n)
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
	if _, err := w.c.route(next); err != nil {
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
	up, down := w.c.authorityUp(w.name)
	switch {
	case !w.usingAlt && !up && down >= w.c.o.AltTimeout:
		w.usingAlt = true
		w.needFresh(1)
		w.follow(w.alt)
	case w.usingAlt && up && w.primaryAnswered():
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
	if ch, err := w.c.route(w.name); err == nil {
		ch.needFresh(w.typ, w.name, add)
	}
}

func (w *watcher) primaryAnswered() bool {
	ch, err := w.c.route(w.name)
	return err == nil && ch.hasAnswered(w.typ, w.name)
}

// deliverMembers tells a glob or wildcard watcher of members as they come
// and go; an empty glob is told DoesNotExist.
func (w *watcher) deliverMembers() {
	cur := map[string]*resource.Variant{}
	var order []string
	w.c.db.Read(func(r *db.Reader) {
		var names []string
		if w.kind == kindGlob {
			names = r.GlobNames(w.typ, w.name)
		} else {
			names = r.Names(w.typ)
		}
		for _, n := range names {
			if v := w.pick(r.Variants(w.typ, n)); v != nil {
				cur[n] = v
				order = append(order, n)
			}
		}
	})
	if w.members == nil {
		w.members = map[string]*resource.Variant{}
		w.memberErrs = map[string]string{}
	}
	// TP1: members of a glob may be redirected individually.
	chain := map[string]bool{}
	via := map[string][]string{}
	for _, n := range order {
		if !cur[n].IsRedirect() {
			continue
		}
		v, target, vs, err := w.resolve(n, cur[n], nil, chain)
		switch {
		case v != nil:
			cur[n], via[n] = v, vs
		case err == nil && !w.c.statusOf([2]string{w.typ, target}).absent && w.members[n] != nil:
			// The target is not here yet: hold on to what the member was.
			cur[n] = w.members[n]
		default:
			delete(cur, n)
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != w.memberErrs[n] {
			if msg == "" {
				delete(w.memberErrs, n)
			} else {
				w.memberErrs[n] = msg
				w.emit(Event{Kind: Errored, Name: n, Err: err, Variant: w.members[n], Via: vs})
			}
		}
	}
	w.letGo(chain)
	for n := range w.memberErrs {
		if _, ok := cur[n]; !ok && !chain[n] {
			delete(w.memberErrs, n)
		}
	}
	for _, n := range order {
		if v := cur[n]; v != nil && v != w.members[n] {
			w.members[n] = v
			w.emit(Event{Kind: Updated, Name: n, Variant: v, Via: via[n]})
		}
	}
	var gone []string
	for n := range w.members {
		if cur[n] == nil {
			gone = append(gone, n)
		}
	}
	sort.Strings(gone)
	for _, n := range gone {
		delete(w.members, n)
		w.emit(Event{Kind: Removed, Name: n})
	}
	st := w.c.statusOf([2]string{w.typ, w.name})
	if len(cur) == 0 && st.absent && !w.toldAbsent {
		w.toldAbsent = true
		w.emit(Event{Kind: DoesNotExist})
	}
	if len(cur) > 0 {
		w.toldAbsent = false
	}
	if st.err != w.lastErr {
		w.lastErr = st.err
		if st.err != "" {
			w.emit(Event{Kind: Errored, Err: errors.New(st.err)})
		}
	}
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

// CollectionMember is one member of a list collection: an inline entry, or
// a resource a locator entry points at.
type CollectionMember struct {
	Name    string // the entry's name (inline) or the locator's URN
	Variant *resource.Variant
	Inline  bool
}

// WatchCollection watches a TP1 list collection and calls h with its whole
// membership whenever it or any member changes: inline entries are taken as
// they are, locator entries are watched. Members not (yet) fetched are
// left out; errors go to onErr when it is set. cancel, or the end of ctx,
// stops it, as for Watch.
func (c *Client) WatchCollection(ctx context.Context, typeURL, collection string, h func([]CollectionMember), onErr func(error)) (cancel func(), err error) {
	coll := resource.ForURL(typeURL)
	if coll.Element == nil {
		return nil, fmt.Errorf("%s is not a list collection type", coll.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lc := &listCollection{c: c, elem: coll.Element, h: h, onErr: onErr, members: map[string]func(){}, values: map[string]*resource.Variant{}}
	cancelColl, err := c.Watch(context.Background(), typeURL, collection, lc.onCollection)
	if err != nil {
		return nil, err
	}
	cancelAll := func() {
		cancelColl()
		// A delivery may be adding members as we go: cancelled stops it
		// from adding more, and the ones it added are cancelled here.
		lc.mu.Lock()
		lc.cancelled = true
		members := lc.members
		lc.members = nil
		lc.mu.Unlock()
		for _, cf := range members {
			cf()
		}
	}
	stop := context.AfterFunc(ctx, cancelAll)
	return func() {
		stop()
		cancelAll()
	}, nil
}

type listCollection struct {
	c     *Client
	elem  *resource.Type
	h     func([]CollectionMember)
	onErr func(error)
	// Handlers run on the delivery goroutine; mu guards members and
	// cancelled against a cancel from elsewhere.
	mu        sync.Mutex
	cancelled bool
	members   map[string]func() // locator URL (with its directives) → cancel
	// Used only by handlers (on the delivery goroutine).
	coll   *resource.Variant
	values map[string]*resource.Variant
}

// onCollection follows the collection's locator entries. It calls no
// callback with lc.mu held: onErr or h may cancel the collection.
func (lc *listCollection) onCollection(e Event) {
	switch e.Kind {
	case Errored:
		lc.reportErr(e.Err)
		return
	case Removed, DoesNotExist:
		lc.coll = nil
	case Updated:
		lc.coll = e.Variant
	}
	var errs []error
	want := map[string]bool{}
	if lc.coll != nil {
		entries, err := resource.CollectionEntries(lc.coll.Body())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", lc.coll.Name, err))
		}
		for _, en := range entries {
			if l := en.GetLocator(); l != nil {
				if n, err := name.FromLocator(l); err == nil {
					// With its directives: an #alt= is the member's.
					want[n.String()] = true
				}
			}
		}
	}
	// Watch and a member's cancel call no callback (this is the delivery
	// goroutine: a cancel does not wait), so they may run under lc.mu,
	// which keeps a cancel from elsewhere from missing a member added.
	lc.mu.Lock()
	if lc.cancelled {
		lc.mu.Unlock()
		return
	}
	for n, cf := range lc.members {
		if !want[n] {
			cf()
			delete(lc.members, n)
			delete(lc.values, n)
		}
	}
	for n := range want {
		if _, ok := lc.members[n]; ok {
			continue
		}
		cf, err := lc.c.Watch(context.Background(), lc.elem.URL, n, func(e Event) {
			switch e.Kind {
			case Updated:
				lc.values[n] = e.Variant
			case Removed, DoesNotExist:
				delete(lc.values, n)
			case Errored:
				lc.reportErr(e.Err)
			}
			lc.report()
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %w", n, err))
			continue
		}
		lc.members[n] = cf
	}
	lc.mu.Unlock()
	for _, err := range errs {
		lc.reportErr(err)
	}
	lc.report()
}

// reportErr passes an error to onErr, if set, unless the collection has
// been cancelled (an earlier onErr may have cancelled it).
func (lc *listCollection) reportErr(err error) {
	if lc.onErr == nil || lc.isCancelled() {
		return
	}
	lc.onErr(err)
}

func (lc *listCollection) isCancelled() bool {
	if lc.c.stopped() {
		return true // a callback closed the client
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.cancelled
}

func (lc *listCollection) report() {
	if lc.isCancelled() {
		return
	}
	var out []CollectionMember
	if lc.coll != nil {
		entries, _ := resource.CollectionEntries(lc.coll.Body())
		for _, en := range entries {
			if ie := en.GetInlineEntry(); ie != nil {
				a := ie.GetResource()
				v := resource.NewVariant(lc.elem, ie.GetName(), constraint.Constraints{}, ie.GetVersion(), a.GetTypeUrl(), a.GetValue())
				out = append(out, CollectionMember{Name: ie.GetName(), Variant: v, Inline: true})
				continue
			}
			if l := en.GetLocator(); l != nil {
				if n, err := name.FromLocator(l); err == nil {
					if v := lc.values[n.String()]; v != nil {
						out = append(out, CollectionMember{Name: n.URN().String(), Variant: v})
					}
				}
			}
		}
	}
	lc.h(out)
}
