package clientcore

import (
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// The cache's side of subscriptions: the db's hooks start and end upstream
// subscriptions, and an ended one's entries are evicted — or linger
// through an outage. Everything but the hooks themselves runs on the state
// goroutine.

// linger is an ended interest whose cache entries outlive it: the channel
// it was subscribed on, and (VHDS) the virtual host its name resolved to,
// which is evicted with it.
type linger struct {
	ch    *channel
	alias string
	sub   db.Sub
}

// interest is the db hook: the first subscription of a (type, name,
// parameters) starts an upstream subscription, the last one ends it. So
// many watchers — or a relay's many downstream streams — share one. It
// runs on the state goroutine, and the caller (the db's Subscribe or
// Unsubscribe) waits for it: an ended interest's entries are evicted
// before a new subscription to them can read them.
func (c *Client) interest(i db.Sub, on bool) {
	c.state.Do(func() {
		if c.keep(i, on) {
			return
		}
		c.interestChanged(i, on)
	})
}

// keep applies Policy.Linger: the last subscriber of i leaving (on false)
// starts a timer that ends the upstream subscription later, instead of
// now; a subscriber arriving meanwhile (on true) stops it and takes the
// subscription, and its cache entry, over as they are. It reports whether
// it took care of the change.
func (c *Client) keep(i db.Sub, on bool) bool {
	if c.policy.Linger <= 0 {
		return false
	}
	if on {
		tm, ok := c.kept[i.Key]
		if !ok {
			return false
		}
		tm.Stop()
		delete(c.kept, i.Key)
		c.lingerCount(true)
		return true
	}
	if c.closed {
		return false
	}
	var tm *time.Timer
	tm = time.AfterFunc(c.policy.Linger, func() {
		c.state.Schedule(func() {
			if c.kept[i.Key] != tm {
				return // taken up again, or the client closed
			}
			delete(c.kept, i.Key)
			c.lingerCount(false)
			c.interestChanged(i, false)
		})
	})
	c.kept[i.Key] = tm
	c.lingerCount(false)
	return true
}

// lingerCount tells the policy how many upstream subscriptions linger.
func (c *Client) lingerCount(revived bool) {
	if c.policy.Lingering != nil {
		c.policy.Lingering(len(c.kept), revived)
	}
}

// upstreamSub is how an interest is subscribed upstream: by TP2 resource
// locator when it has parameters (or the policy says always).
func (c *Client) upstreamSub(i db.Sub) *db.Sub {
	i.Locator = i.ParamsKey != "" || c.policy.Locators
	return &i
}

func (c *Client) interestChanged(i db.Sub, on bool) {
	ch, err := c.route(i.Name)
	k := db.Key{Type: i.Type, Name: i.Name}
	if err != nil {
		// Unroutable (an unknown authority): the status carries the error
		// for watchers, and goes with the last interest.
		st := c.stat(k)
		if on {
			st.interest++
			st.err = err.Error()
		} else if st.interest--; st.interest <= 0 {
			c.dropStatus(k)
		}
		return
	}
	if !on {
		// The channel decides whether what the interest covered lingers
		// (its stream is not healthy) and keeps holding it if so.
		lingered := ch.unsubscribe(c.upstreamSub(i).Key)
		alias := ""
		if st := c.status[k]; st != nil {
			alias = st.alias
			if st.interest--; st.interest <= 0 {
				if st.timer != nil {
					st.timer.Stop()
				}
				c.dropStatus(k)
			}
		}
		// (Not the last interest in the name: the variant these parameters
		// selected goes, or lingers, all the same — unless another
		// parameter set selects it too; see evict.)
		if lingered {
			c.lingering[i.Key] = linger{ch: ch, alias: alias, sub: i}
		} else {
			c.evict(ch, i, alias)
		}
		return
	}
	delete(c.lingering, i.Key) // followed again: its cache entry is current once more
	st := c.stat(k)
	st.interest++
	if !st.got && !st.absent && st.timer == nil && ch.connected >= 0 {
		c.startTimer(k, st)
	}
	ch.subscribe(c.upstreamSub(i))
}

// subscribed is the db hook called on every subscription: a cached copy
// marked do_not_cache may not answer it, so it is fetched again upstream.
// It runs on the subscriber's goroutine; the refetch is the state
// goroutine's.
func (c *Client) subscribed(i db.Sub) {
	var v *resource.Variant
	c.db.Read(func(r *db.Reader) { v = r.Get(i.Type, i.Name, i.Params) })
	if v != nil && v.DoNotCache {
		c.state.Schedule(func() {
			if ch, err := c.route(i.Name); err == nil {
				ch.refetch(c.upstreamSub(i).Key)
			}
		})
	}
	if c.policy.Subscribed != nil {
		c.policy.Subscribed(i, v != nil)
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
		switch i.Kind {
		case db.AllOfType:
			names = r.Names(i.Type)
		case db.Glob:
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
	var gone []db.Key
	var goneNames []string
	// Other parameter sets still following the name: only the variants
	// none of them selects go (an unfollowed variant would be served stale
	// to the next subscriber with these parameters).
	selective := len(names) == 1 && names[0] == i.Name && !i.IsCollection() && c.covered(i.Type, i.Name)
	for _, n := range names {
		if !c.covered(i.Type, n) {
			gone = append(gone, db.Key{Type: i.Type, Name: n})
			goneNames = append(goneNames, n)
			c.dropIdle(db.Key{Type: i.Type, Name: n})
		}
	}
	var goneVariants []resource.Key
	if selective {
		goneVariants = c.unselected(ch, i)
	}
	ch.forget(i.Type, goneNames)
	ch.forgetVariants(goneVariants)
	// Forget that the source answered for the name: a later subscription
	// must ask again.
	u := db.Update{ResourceDeletes: gone, Deletes: goneVariants, Unknown: []db.Key{i.Key, {Type: i.Type, Name: i.Name, ParamsKey: db.AnyParams}}}
	if alias != "" {
		u.Unknown = append(u.Unknown, db.Key{Type: i.Type, Name: alias, ParamsKey: i.ParamsKey})
	}
	c.db.Update(u)
}

// unselected returns the cached variants of i's name that no parameter set
// still subscribed to the name selects, once i has ended; none when a
// subscription that is not by parameters (the server picks its variant by
// node), the wildcard or a glob covers the name.
func (c *Client) unselected(ch *channel, i db.Sub) []resource.Key {
	var remaining []constraint.Params
	all := false
	if t := ch.types[i.Type]; t != nil {
		for _, s := range t.subs {
			switch {
			case s.Name == i.Name && s.Locator:
				remaining = append(remaining, s.Params)
			case s.Covers(i.Name):
				all = true
			}
		}
	}
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
	wants := func(string) bool { return false }
	if t := ch.types[typeURL]; t != nil {
		wants = t.wanted()
	}
	for k, st := range c.status {
		if k.Type != typeURL || st.interest > 0 || st.timer != nil || wants(k.Name) {
			continue
		}
		if g, ok := db.InGlob(k.Name); coll != db.Wildcard && (!ok || g != coll) {
			continue
		}
		c.dropStatus(k)
	}
}

// covered reports whether a remaining interest covers a resource.
func (c *Client) covered(typeURL, n string) bool {
	covers := func(name string) bool {
		st := c.status[db.Key{Type: typeURL, Name: name}]
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
		if k.Type == typeURL && st.alias == n && st.interest > 0 {
			return true
		}
	}
	return false
}

// dropIdle forgets the status of a resource nothing covers any more (no
// interest of its own, nor a wildcard, glob or VHDS name's), unless a
// does-not-exist timer runs for it.
func (c *Client) dropIdle(k db.Key) {
	if st := c.status[k]; st != nil && st.interest <= 0 && st.timer == nil && !c.covered(k.Type, k.Name) {
		c.dropStatus(k)
	}
}

// healthy is told when a channel's stream has proved itself: cache entries
// left lingering by interests that ended during the outage, and not taken
// up again since, are evicted now that the upstream can be asked afresh.
func (c *Client) healthy(ch *channel) {
	for k, l := range c.lingering {
		if l.ch == ch {
			delete(c.lingering, k)
			c.evict(ch, l.sub, l.alias)
		}
	}
}
