package clientcore

import (
	"time"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// resStatus is what the client knows of one resource beyond its contents;
// the state goroutine keeps it.
type resStatus struct {
	got      bool
	absent   bool   // the server says it does not exist, or it never came
	err      string // the reason the last version was rejected
	alias    string // VHDS: the virtual host a requested name resolved to
	timer    *time.Timer
	interest int
}

// statusView is what watchers see of a status.
type statusView struct {
	absent     bool
	err, alias string
}

// stat returns the status of k, made if there is none, for a change.
func (c *Client) stat(k db.Key) *resStatus {
	c.touched[k] = struct{}{}
	st := c.status[k]
	if st == nil {
		st = &resStatus{}
		c.status[k] = st
	}
	return st
}

func (c *Client) dropStatus(k db.Key) {
	c.touched[k] = struct{}{}
	delete(c.status, k)
}

// publish runs after each callback of the state goroutine: the statuses
// it changed (or whose watchers it must wake) are published to watchers,
// and their watchers woken.
func (c *Client) publish() {
	if len(c.touched) == 0 {
		return
	}
	keys := make([]db.Key, 0, len(c.touched))
	for k := range c.touched {
		if st := c.status[k]; st != nil {
			c.views.Store(k, statusView{absent: st.absent, err: st.err, alias: st.alias})
		} else {
			c.views.Delete(k)
		}
		keys = append(keys, k)
	}
	clear(c.touched)
	c.handlers.Schedule(func() { c.wake(keys) })
}

// view is a status as the state goroutine last published it.
func (c *Client) view(typeURL, n string) statusView {
	v, _ := c.views.Load(db.Key{Type: typeURL, Name: n})
	sv, _ := v.(statusView)
	return sv
}

// startTimer arms the does-not-exist timer (docs/protocol.md §1.8).
func (c *Client) startTimer(k db.Key, st *resStatus) {
	// (Closed: a stream coming up as Close stops them starts none.)
	if k.Name == db.Wildcard || c.o.DoesNotExistTimeout < 0 || c.closed {
		return
	}
	var tm *time.Timer
	tm = time.AfterFunc(c.o.DoesNotExistTimeout, func() {
		c.state.Schedule(func() {
			if cur := c.status[k]; cur != st || st.got || st.absent || st.timer != tm {
				return // answered, stopped or gone meanwhile
			}
			c.stat(k).absent = true
			st.timer = nil
			c.db.Update(db.Update{Known: []db.Key{{Type: k.Type, Name: k.Name, ParamsKey: db.AnyParams}}})
		})
	})
	st.timer = tm
}

// channelState is told when a channel's stream comes up or goes down: the
// does-not-exist timers run only while connected, and watchers with an
// #alt= fallback reconsider.
func (c *Client) channelState(ch *channel, up bool) {
	for u, t := range ch.types {
		for sk := range t.subs {
			k := db.Key{Type: u, Name: sk.Name}
			st := c.status[k]
			if st == nil {
				continue
			}
			if up && !st.got && !st.absent && st.timer == nil {
				c.startTimer(k, st)
			}
			if !up && st.timer != nil {
				st.timer.Stop()
				st.timer = nil
			}
		}
	}
	c.handlers.Schedule(func() { c.altsReconsider(up) })
}

// applied is told what a channel stored from a response: it updates the db
// and the resources' status, and wakes their watchers.
func (c *Client) applied(ch *channel, typeURL string, u db.Update, d *decoded) {
	if len(u.Puts)+len(u.Deletes)+len(u.ResourceDeletes)+len(u.Known) > 0 {
		c.db.Update(u)
	}
	// Only now that the cache has it: an #alt= watcher returns to the
	// primary on this, and must not read what it replaced.
	ch.answeredNow(typeURL, d)
	var keys []db.Key
	stopTimer := func(st *resStatus) {
		if st.timer != nil {
			st.timer.Stop()
			st.timer = nil
		}
	}
	got := map[string]bool{}
	for _, v := range d.puts {
		k := db.Key{Type: typeURL, Name: v.Name}
		st := c.stat(k)
		st.got, st.absent, st.err = true, false, ""
		stopTimer(st)
		got[v.Name] = true
		keys = append(keys, k)
	}
	for alias, vh := range d.aliases {
		k := db.Key{Type: typeURL, Name: alias}
		st := c.stat(k)
		st.alias, st.got, st.absent = vh, true, false
		stopTimer(st)
		keys = append(keys, k)
	}
	for _, n := range append(append(append([]string(nil), d.removed...), d.notFound...), d.emptied...) {
		k := db.Key{Type: typeURL, Name: n}
		st := c.stat(k)
		st.absent, st.alias = true, ""
		stopTimer(st)
		keys = append(keys, k)
	}
	keys = append(keys, c.unalias(typeURL, d)...)
	for _, g := range d.gone {
		k := db.Key{Type: typeURL, Name: g.Name}
		c.touched[k] = struct{}{} // its watchers look again
		keys = append(keys, k)
	}
	for n, msg := range d.bad {
		if got[n] {
			continue
		}
		k := db.Key{Type: typeURL, Name: n}
		c.stat(k).err = msg
		keys = append(keys, k)
	}
	// What nothing covers any more (an answer crossing an unsubscription,
	// a virtual host whose names are gone) leaves no status behind.
	for _, k := range keys {
		c.dropIdle(k)
	}
}

// unalias: on-demand VHDS names that resolved to a virtual host the
// response removed (a server removes one by its VirtualHost name,
// docs/protocol.md §5.4; or its TTL ran out) lose it: each is told the host
// is gone, and resolves afresh among the virtual hosts cached. It returns
// their keys.
func (c *Client) unalias(typeURL string, d *decoded) []db.Key {
	if typeURL != resource.VirtualHostURL || len(d.removed)+len(d.emptied) == 0 {
		return nil
	}
	gone := make(map[string]bool, len(d.removed)+len(d.emptied))
	for _, n := range append(append([]string(nil), d.removed...), d.emptied...) {
		gone[n] = true
	}
	var keys []db.Key
	for k, st := range c.status {
		if k.Type == typeURL && st.alias != "" && gone[st.alias] {
			c.touched[k] = struct{}{}
			st.alias, st.absent = "", true
			keys = append(keys, k)
		}
	}
	return keys
}
