package db

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// Wildcard is the name of a wildcard subscription.
const Wildcard = "*"

// AnyParams, as the Params of a Known, answers for a name under every
// parameter set (a client that gave up waiting: does-not-exist).
const AnyParams = "\x00any"

// DB is the subscription database. It is safe for concurrent use.
type DB struct {
	mu       sync.RWMutex
	cache    bool
	rev      int64
	tables   map[string]*table
	interest map[Key]int // subscriptions per distinct interest (Key.interest), across subscribers
	epoch    uint64
	hooks    Hooks
	reader   Reader // handed to every Read (a Reader holds nothing of its own)
	stage    *Stage // the staged revision served (stage.go), or nil
	outside  Reader // Reader.Outside's view while a revision is staged

	// The hook queue: callers of Subscribe and Unsubscribe with hooks due
	// take their turn in the order of their state changes (the turn is
	// taken under mu), so that the Interest hooks of a first and a last
	// subscription of one interest never run out of order. Each caller
	// runs its own hooks, so they have run when Subscribe or Unsubscribe
	// returns.
	hmu      sync.Mutex
	hookBusy bool            // a caller is running its hooks
	hookWait []chan struct{} // callers waiting for their turn, in order
}

// hookNow is the turn of a caller that may run its hooks at once.
var hookNow = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Hooks tell a cache (client, relay) when interest in a resource starts and
// stops, so it can subscribe and unsubscribe upstream. They are called after
// the db's lock is released, on the goroutine of the Subscribe or
// Unsubscribe that made them due, and have run when it returns. The
// subscription they are given is the interest: its Locator is false (the
// db does not tell a locator from a plain subscription with the same
// parameters; one upstream subscription serves both).
type Hooks struct {
	// Interest is called when the first subscription of an interest starts
	// (on=true) and when the last one stops (on=false): one call at a time,
	// in the order of the changes they report (an Interest(s, false) that
	// ended s comes before the Interest(s, true) of a subscription that
	// started it again). It may read and update the db, but must not
	// subscribe or unsubscribe in it (that would wait for its own turn),
	// and must not block for long: every later Subscribe and Unsubscribe
	// that calls it waits.
	Interest func(s Sub, on bool)
	// Subscribed is called on every subscription, after Interest, and after
	// every Interest call of earlier changes has returned (a relay counts
	// cache hits with it, and refetches what it may not cache). It is not
	// called in turn: calls may run concurrently, and may subscribe.
	Subscribed func(s Sub)
}

// New returns an empty database whose contents are authoritative: a name
// it does not hold does not exist (a server's).
func New(h Hooks) *DB {
	d := &DB{tables: map[string]*table{}, interest: map[Key]int{}, hooks: h}
	d.reader.d = d
	d.outside.d = d
	return d
}

// NewCache returns an empty database whose contents are a cache of
// another source (a client's, a relay's): a name it does not hold is
// unknown until the source says it does not exist (Update.Known), so a
// relay never tells a downstream client "does not exist" on a mere miss.
func NewCache(h Hooks) *DB {
	d := New(h)
	d.cache = true
	return d
}

type table struct {
	typ      *resource.Type
	known    map[string]map[string]bool // cache: name (also Wildcard, globs, VHDS names) → parameter keys the source has answered
	entries  map[string]*entry
	ttls     int // variants with a TTL
	wildcard map[*Subscriber]int
	globs    map[string]*glob // by canonical glob URL
	vhds     map[string]*vhds // VirtualHost only: by route configuration name
}

type entry struct {
	name     string
	changed  int64               // the revision that last changed the variants
	ttls     int                 // variants with a TTL
	variants []*resource.Variant // sorted by constraint key
	subs     map[*Subscriber]int
	// globKey is the glob collection that holds this entry while it has
	// variants ("" for none), computed once (globKnown). The glob itself is
	// looked up by key each time: it comes and goes with its members and
	// subscribers, and an entry may outlive it (subscribed by name, no
	// variants).
	globKey   string
	globKnown bool
	vhds      *vhds    // VirtualHost: its route configuration's namespace
	domains   []string // VirtualHost: union of the variants' domains, indexed in vhds
	// variantDomains: VirtualHost: each variant's domains, lowercased,
	// read once when indexed (resolving a host must not decode payloads).
	variantDomains map[*resource.Variant][]string
}

func (e *entry) empty() bool { return len(e.variants) == 0 && len(e.subs) == 0 }

func (e *entry) subscribe(s *Subscriber) {
	if e.subs == nil {
		e.subs = map[*Subscriber]int{}
	}
	e.subs[s]++
}

// selectVariant picks the variant whose constraints match p. The variants of
// a resource are mutually exclusive (the store and TP2 require it), so the
// first match is the only one.
func (e *entry) selectVariant(p constraint.Params) *resource.Variant {
	for _, v := range e.variants {
		if v.Constraints.Match(p) {
			return v
		}
	}
	return nil
}

type glob struct {
	key     string
	members map[string]*entry // entries with at least one variant
	subs    map[*Subscriber]int
}

func (d *DB) table(typeURL string) *table {
	t := d.tables[typeURL]
	if t == nil {
		t = &table{
			typ:      resource.ForURL(typeURL),
			entries:  map[string]*entry{},
			wildcard: map[*Subscriber]int{},
			globs:    map[string]*glob{},
			known:    map[string]map[string]bool{},
		}
		if typeURL == resource.VirtualHostURL {
			t.vhds = map[string]*vhds{}
		}
		d.tables[typeURL] = t
	}
	return t
}

func (t *table) entry(n string) *entry {
	e := t.entries[n]
	if e == nil {
		e = &entry{name: n} // (subs made by the first subscriber: most entries of a large state have none yet)
		t.entries[n] = e
	}
	return e
}

func (t *table) glob(key string) *glob {
	g := t.globs[key]
	if g == nil {
		g = &glob{key: key, members: map[string]*entry{}, subs: map[*Subscriber]int{}}
		t.globs[key] = g
	}
	return g
}

// gc drops an entry that has neither variants nor subscribers, and the
// indexes it leaves empty. It runs after subscribers are marked, so that a
// deletion still reaches the glob and VHDS subscribers that saw the entry.
func (t *table) gc(e *entry) {
	if !e.empty() {
		return
	}
	delete(t.entries, e.name)
	if g := t.globOf(e); g != nil {
		t.gcGlob(g)
	}
	if e.vhds != nil {
		t.gcVHDS(e.vhds.rc)
	}
}

// globOf returns the glob collection currently holding e, if any.
func (t *table) globOf(e *entry) *glob {
	if e.globKey == "" {
		return nil
	}
	return t.globs[e.globKey]
}

func (t *table) gcGlob(g *glob) {
	if len(g.members) == 0 && len(g.subs) == 0 {
		delete(t.globs, g.key)
	}
}

// Update is one atomic change of contents.
type Update struct {
	// Rev is the revision the update brings the db to; when zero the db
	// counts its own revisions.
	Rev int64
	// Reset replaces the whole contents: every variant not in Puts is
	// removed.
	Reset bool
	Puts  []*resource.Variant
	// Deletes remove single variants.
	Deletes []resource.Key
	// ResourceDeletes remove every variant of a resource (by Type and
	// Name); Deletes remove one variant each.
	ResourceDeletes []Key
	// Known marks subscriptions — a resource, Wildcard, a glob URL or a
	// VHDS name, under a parameter key (or AnyParams) — as answered by the
	// source (a cache's); Unknown forgets that (when the cache stops
	// following them). A server's db ignores both; Locator is ignored.
	Known, Unknown []Key
	// At is when the change was made, for apply-to-send latency; zero means
	// now.
	At time.Time
	// Stage is the staged revision served from this update on, nil for
	// none (a server's; a cache's db never has one). Passing the same
	// pointer again changes nothing.
	Stage *Stage
}

// Changed is one pending change a subscriber has been told about.
type Changed struct {
	Type string
	Name string
}

// Update applies u atomically and marks every subscriber of what changed:
// subscribers of the resource, wildcard subscribers of its type, glob
// subscribers of its collection, and VHDS subscribers of its route
// configuration. Each marked subscriber is signalled once.
func (d *DB) Update(u Update) {
	at := u.At
	if at.IsZero() {
		at = time.Now()
	}
	d.mu.Lock()
	d.epoch++
	m := marker{epoch: d.epoch, at: at}
	if u.Rev > 0 {
		d.rev = u.Rev
	} else {
		d.rev++
	}
	if u.Reset && len(d.tables) > 0 {
		keep := make(map[resource.Key]bool, len(u.Puts))
		for _, v := range u.Puts {
			keep[v.Key()] = true
		}
		for _, t := range d.tables {
			for _, e := range t.entries {
				for _, v := range e.variants {
					if k := v.Key(); !keep[k] {
						u.Deletes = append(u.Deletes, k)
					}
				}
			}
		}
	}
	// Sized for the update: a server's load of a million variants spent a
	// fifth of its db time growing this map.
	size := len(u.Deletes) + len(u.ResourceDeletes)
	if len(d.tables) > 0 {
		size += len(u.Puts) // (a first load does without: load)
	}
	touched := make(map[*entry]*table, size)
	for _, k := range u.Deletes {
		t := d.tables[k.Type]
		if t == nil {
			continue
		}
		e := t.entries[k.Name]
		if e == nil {
			continue
		}
		for i, v := range e.variants {
			if v.Constraints.Key() == k.Constraints {
				e.variants = append(e.variants[:i:i], e.variants[i+1:]...)
				touched[e] = t
				break
			}
		}
	}
	for _, r := range u.ResourceDeletes {
		t := d.tables[r.Type]
		if t == nil {
			continue
		}
		if e := t.entries[r.Name]; e != nil && len(e.variants) > 0 {
			e.variants = nil
			touched[e] = t
		}
	}
	puts := u.Puts
	if len(d.tables) == 0 {
		d.load(puts)
		puts = nil
	}
	for _, v := range puts {
		t := d.table(v.Type.URL)
		e := t.entry(v.Name)
		ck := v.Constraints.Key()
		i := sort.Search(len(e.variants), func(i int) bool { return e.variants[i].Constraints.Key() >= ck })
		if i < len(e.variants) && e.variants[i].Constraints.Key() == ck {
			if e.variants[i] == v {
				continue
			}
			nv := append([]*resource.Variant(nil), e.variants...)
			nv[i] = v
			e.variants = nv
		} else {
			nv := make([]*resource.Variant, 0, len(e.variants)+1)
			nv = append(append(append(nv, e.variants[:i]...), v), e.variants[i:]...)
			e.variants = nv
		}
		touched[e] = t
	}
	for e, t := range touched {
		e.changed = d.rev
		ttls := countTTLs(e.variants)
		t.ttls += ttls - e.ttls
		e.ttls = ttls
		d.reindex(t, e)
		m.entry(t, e)
		t.gc(e)
	}
	d.setStage(u.Stage, &m)
	if d.cache {
		for _, k := range u.Unknown {
			if t := d.tables[k.Type]; t != nil && t.known[k.Name] != nil {
				delete(t.known[k.Name], k.ParamsKey)
				if len(t.known[k.Name]) == 0 {
					delete(t.known, k.Name)
				}
			}
		}
		for _, k := range u.Known {
			t := d.table(k.Type)
			if t.known[k.Name] == nil {
				t.known[k.Name] = map[string]bool{}
			}
			if t.known[k.Name][k.ParamsKey] {
				continue
			}
			t.known[k.Name][k.ParamsKey] = true
			m.name(t, k.Name)
		}
	}
	d.mu.Unlock()
	m.signal()
}

// load puts the variants of a first update into an empty db. With no
// table there is no subscriber to mark and nothing to replace, so the
// entries are made in one pass, in the order of the variants, without
// Update's set of touched entries: a server's load of a million variants
// spent 1.8 s of CPU in Update, a third of it walking that set's entries
// in the map's order, a cache miss each.
func (d *DB) load(puts []*resource.Variant) {
	// Each table's entries sized at once, not grown (rehashed) step by
	// step to a million.
	counts := map[string]int{}
	for _, v := range puts {
		counts[v.Type.URL]++
	}
	for url, n := range counts {
		d.table(url).entries = make(map[string]*entry, n)
	}
	type made struct {
		t *table
		e *entry
	}
	all := make([]made, 0, len(puts))
	var t *table
	url := ""
	for _, v := range puts {
		if t == nil || v.Type.URL != url {
			t, url = d.tables[v.Type.URL], v.Type.URL
		}
		e := t.entries[v.Name]
		if e == nil {
			e = &entry{name: v.Name, changed: d.rev, variants: []*resource.Variant{v}}
			t.entries[v.Name] = e
			all = append(all, made{t, e})
			continue
		}
		// Another variant of the resource (the slice is this load's).
		ck := v.Constraints.Key()
		i := sort.Search(len(e.variants), func(i int) bool { return e.variants[i].Constraints.Key() >= ck })
		if i < len(e.variants) && e.variants[i].Constraints.Key() == ck {
			e.variants[i] = v
		} else {
			e.variants = slices.Insert(e.variants, i, v)
		}
	}
	for _, m := range all {
		m.e.ttls = countTTLs(m.e.variants)
		m.t.ttls += m.e.ttls
		d.reindex(m.t, m.e)
	}
}

// countTTLs is how many of vs have a TTL: an entry's share of its
// table's ttls, which Update and load keep.
func countTTLs(vs []*resource.Variant) int {
	n := 0
	for _, v := range vs {
		if v.TTL > 0 {
			n++
		}
	}
	return n
}

// Known reports whether the source has answered for a subscription
// (always, for a server's db): a resource, Wildcard, a glob URL or a VHDS
// name, under its parameters. A held variant matching them answers.
func (r *Reader) Known(s Sub) bool {
	if !r.d.cache {
		return true
	}
	t := r.d.tables[s.Type]
	if t == nil {
		return false
	}
	if k := t.known[s.Name]; k[s.ParamsKey] || k[AnyParams] {
		return true
	}
	e := t.entries[s.Name]
	return e != nil && e.selectVariant(s.Params) != nil
}

// reindex keeps the glob and VHDS indexes in step with an entry's variants.
func (d *DB) reindex(t *table, e *entry) {
	present := len(e.variants) > 0
	if !e.globKnown {
		e.globKey, _ = InGlob(e.name)
		e.globKnown = true
	}
	if e.globKey != "" {
		if present {
			t.glob(e.globKey).members[e.name] = e
		} else if g := t.globs[e.globKey]; g != nil {
			delete(g.members, e.name)
		}
	}
	if t.vhds != nil {
		t.indexVirtualHost(e)
	}
}

// marker collects the subscribers an update affects, so that each is
// signalled once, after the lock is released.
type marker struct {
	epoch uint64
	at    time.Time
	subs  []*Subscriber
}

func (m *marker) mark(s *Subscriber, typeURL, n string) {
	s.mark(typeURL, n, m.at)
	if s.epoch != m.epoch {
		s.epoch = m.epoch
		m.subs = append(m.subs, s)
	}
}

func (m *marker) entry(t *table, e *entry) {
	for s := range e.subs {
		m.mark(s, t.typ.URL, e.name)
	}
	for s := range t.wildcard {
		m.mark(s, t.typ.URL, e.name)
	}
	if g := t.globOf(e); g != nil {
		for s := range g.subs {
			m.mark(s, t.typ.URL, e.name)
		}
	}
	if e.vhds != nil {
		for s := range e.vhds.subs {
			m.mark(s, t.typ.URL, e.name)
		}
	}
}

// name marks the subscribers of a name (a resource, Wildcard, a glob).
func (m *marker) name(t *table, n string) {
	switch {
	case n == Wildcard:
		for s := range t.wildcard {
			m.mark(s, t.typ.URL, n)
		}
	case t.globs[n] != nil:
		for s := range t.globs[n].subs {
			m.mark(s, t.typ.URL, n)
		}
	default:
		if e := t.entries[n]; e != nil {
			for s := range e.subs {
				m.mark(s, t.typ.URL, n)
			}
		}
	}
}

func (m *marker) signal() {
	for _, s := range m.subs {
		s.signal()
	}
}

// Rev is the db's revision.
func (d *DB) Rev() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.rev
}

// Subscriber is one party that subscribes: a downstream stream, or a local
// watcher. The db marks it with what changed and signals it; it reads the
// changes with Drain and the contents with Read.
type Subscriber struct {
	notify func()
	// Owner is the party behind the subscriber (a protocol stream), for
	// the fleet index's readers: who subscribes to a resource is walked
	// here (Reader.Subscribers), and what each holds and answered is
	// asked of its owner. Set before the first subscription; read-only
	// after.
	Owner any

	mu sync.Mutex
	// one is the first pending change (Type "" when none), kept apart
	// from the map: most updates touch one resource of a subscriber, and
	// a fan-out then marks and drains each subscriber without hashing.
	one     Changed
	pending map[Changed]struct{} // the pending changes other than one
	spare   map[Changed]struct{} // the map the last DrainFunc handed back, for reuse
	since   int64                // Unix nanoseconds of the oldest pending change (8 bytes, not a time.Time's 24: a subscriber per stream)

	// Guarded by DB.mu.
	epoch uint64
}

// NewSubscriber returns a subscriber; notify is called (from any goroutine,
// never with db locks held) once per update that touches it, and must not
// block.
func NewSubscriber(notify func()) *Subscriber {
	return &Subscriber{notify: notify}
}

func (s *Subscriber) mark(typeURL, n string, at time.Time) {
	c := Changed{typeURL, n}
	s.mu.Lock()
	if t := at.UnixNano(); s.one.Type == "" || t < s.since {
		s.since = t
	}
	switch {
	case s.one.Type == "":
		s.one = c
	case c != s.one:
		if s.pending == nil {
			if s.spare != nil {
				s.pending, s.spare = s.spare, nil
			} else {
				s.pending = map[Changed]struct{}{}
			}
		}
		s.pending[c] = struct{}{}
	}
	s.mu.Unlock()
}

func (s *Subscriber) signal() {
	if s.notify != nil {
		s.notify()
	}
}

// Drain returns and clears what changed since the last Drain, and when the
// oldest of those changes was made.
func (s *Subscriber) Drain() (map[Changed]struct{}, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, at := s.pending, s.since
	if s.one.Type != "" {
		if p == nil {
			p = map[Changed]struct{}{}
		}
		p[s.one] = struct{}{}
	}
	s.one, s.pending = Changed{}, nil
	return p, unixTime(at)
}

// DrainFunc is Drain without allocating: fn sees each change, and the
// pending set is cleared and kept for the next marks. It returns when the
// oldest change was made.
func (s *Subscriber) DrainFunc(fn func(Changed)) time.Time {
	s.mu.Lock()
	one, p, at := s.one, s.pending, s.since
	s.one, s.pending = Changed{}, nil
	s.mu.Unlock()
	if one.Type == "" {
		return time.Time{} // nothing pending: the map is only used beside one
	}
	fn(one)
	for c := range p {
		fn(c)
	}
	if p != nil {
		clear(p)
		s.mu.Lock()
		if s.spare == nil {
			s.spare = p
		}
		s.mu.Unlock()
	}
	return unixTime(at)
}

// unixTime is the time of Unix nanoseconds n; zero for 0 (no change yet).
func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Subscribe adds a subscription of s: to a resource name, to Wildcard, to a
// glob collection URL (TP1: immediate children with identical context
// parameters), or, for virtual hosts, to "<route config>/<host>" resolved
// by domain (on-demand VHDS); sub.Params select variants. Subscribing twice
// alike counts twice.
func (d *DB) Subscribe(s *Subscriber, sub Sub) {
	k := sub.Key.interest()
	d.mu.Lock()
	first := d.addInterest(k)
	t := d.table(sub.Type)
	switch sub.Kind {
	case AllOfType:
		t.wildcard[s]++
	case Glob:
		t.glob(sub.Name).subs[s]++
	case VHDS:
		t.vhdsNS(vhdsRouteConfig(sub.Name)).subs[s]++
		t.entry(sub.Name).subscribe(s)
	default:
		t.entry(sub.Name).subscribe(s)
	}
	interest := first && d.hooks.Interest != nil
	var turn chan struct{}
	if interest || d.hooks.Subscribed != nil {
		turn = d.hookTurn()
	}
	d.mu.Unlock()
	if turn == nil {
		return
	}
	sub.Key = k
	d.runHooks(turn, func() {
		if interest {
			d.hooks.Interest(sub, true)
		}
	})
	// After every earlier hook, but out of turn: Subscribed may subscribe.
	if d.hooks.Subscribed != nil {
		d.hooks.Subscribed(sub)
	}
}

// runHooks waits for a caller's turn, runs fn, and ends the turn (also
// when fn panics).
func (d *DB) runHooks(turn chan struct{}, fn func()) {
	<-turn
	defer d.hookDone()
	fn()
}

// Unsubscribe removes one subscription made by Subscribe. A subscriber
// that goes away unsubscribes whatever it subscribed (the db keeps no list
// per subscriber: a stream or watcher knows its own).
func (d *DB) Unsubscribe(s *Subscriber, sub Sub) {
	sub.Key = sub.Key.interest()
	d.mu.Lock()
	last := d.unsubscribe(s, sub) && d.hooks.Interest != nil
	var turn chan struct{}
	if last {
		turn = d.hookTurn()
	}
	d.mu.Unlock()
	if !last {
		return
	}
	d.runHooks(turn, func() { d.hooks.Interest(sub, false) })
}

// hookTurn queues a caller with hooks due; the returned channel is closed
// when its turn comes. d.mu is held, so turns follow the state changes.
func (d *DB) hookTurn() chan struct{} {
	d.hmu.Lock()
	defer d.hmu.Unlock()
	if !d.hookBusy {
		d.hookBusy = true
		return hookNow
	}
	c := make(chan struct{})
	d.hookWait = append(d.hookWait, c)
	return c
}

// hookDone ends a caller's turn and hands it to the next in line.
func (d *DB) hookDone() {
	d.hmu.Lock()
	defer d.hmu.Unlock()
	if len(d.hookWait) == 0 {
		d.hookBusy = false
		return
	}
	next := d.hookWait[0]
	d.hookWait[0] = nil
	d.hookWait = d.hookWait[1:]
	if len(d.hookWait) == 0 {
		d.hookWait = nil // let the backing array go
	}
	close(next)
}

func (d *DB) addInterest(k Key) bool {
	d.interest[k]++
	return d.interest[k] == 1
}

func (d *DB) dropInterest(k Key) bool {
	if d.interest[k]--; d.interest[k] > 0 {
		return false
	}
	delete(d.interest, k)
	return true
}

func (d *DB) unsubscribe(s *Subscriber, sub Sub) bool {
	t := d.tables[sub.Type]
	if t == nil {
		return false
	}
	subscribed := true
	dec := func(m map[*Subscriber]int) {
		if m[s] <= 0 {
			subscribed = false // not subscribed: nothing to undo
			return
		}
		if m[s]--; m[s] == 0 {
			delete(m, s)
		}
	}
	switch sub.Kind {
	case AllOfType:
		dec(t.wildcard)
	case Glob:
		if g := t.globs[sub.Name]; g != nil {
			dec(g.subs)
			t.gcGlob(g)
		}
	case VHDS:
		rc := vhdsRouteConfig(sub.Name)
		if ns := t.vhds[rc]; ns != nil {
			dec(ns.subs)
			t.gcVHDS(rc)
		}
		fallthrough
	default:
		if e := t.entries[sub.Name]; e != nil {
			dec(e.subs)
			t.gc(e)
		} else {
			subscribed = false
		}
	}
	if !subscribed {
		return false
	}
	if !t.typ.Known && len(t.entries) == 0 && len(t.wildcard) == 0 && len(t.globs) == 0 && len(t.known) == 0 {
		// A type xdsd does not know, with nothing left in it: gone, so a
		// peer naming made-up types cannot grow the db without end.
		delete(d.tables, sub.Type)
	}
	return d.dropInterest(sub.Key)
}

// Subscribers calls fn once for each subscriber a change of the resource
// named n reaches — those Update would mark: its subscribers by name, the
// wildcard subscribers of its type, those of the glob collection holding
// it, and those of its route configuration's on-demand VHDS names — so
// that asking who a change concerns costs its subscribers, not every
// subscriber. seen, when not nil, skips and collects subscribers already
// met (several names asked in turn).
func (r *Reader) Subscribers(typeURL, n string, seen map[*Subscriber]bool, fn func(*Subscriber)) {
	t := r.d.tables[typeURL]
	if t == nil {
		return
	}
	visit := func(m map[*Subscriber]int) {
		for s := range m {
			if seen != nil {
				if seen[s] {
					continue
				}
				seen[s] = true
			}
			fn(s)
		}
	}
	if e := t.entries[n]; e != nil {
		visit(e.subs)
	}
	visit(t.wildcard)
	if g, ok := InGlob(n); ok && t.globs[g] != nil {
		visit(t.globs[g].subs)
	}
	if t.vhds != nil {
		if ns := t.vhds[vhdsRouteConfig(n)]; ns != nil {
			visit(ns.subs)
		}
	}
}

// Read calls fn with a consistent view of the contents: everything fn reads
// is from one revision, so a store batch is seen whole.
func (d *DB) Read(fn func(r *Reader)) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	fn(&d.reader)
}

// Reader reads contents inside Read; it is valid only there.
type Reader struct {
	d *DB
	// stage, set in the view of a stream outside a staged revision's
	// canary (Outside), reads what the revision changed as it was.
	stage *Stage
}

// Rev is the revision being read.
func (r *Reader) Rev() int64 { return r.d.rev }

// HasTTL reports whether any variant of a type has a TTL (so streams need
// heartbeat rounds; docs/protocol.md §2.7).
func (r *Reader) HasTTL(typeURL string) bool {
	t := r.d.tables[typeURL]
	return t != nil && t.ttls > 0
}

// Get returns the variant of a resource that matches params, or nil.
func (r *Reader) Get(typeURL, n string, params constraint.Params) *resource.Variant {
	if vs, ok := r.prev(typeURL, n); ok {
		return selectFrom(vs, params)
	}
	t := r.d.tables[typeURL]
	if t == nil {
		return nil
	}
	if e := t.entries[n]; e != nil {
		return e.selectVariant(params)
	}
	return nil
}

// ChangedAt is the revision that last changed a resource's variants (0
// when it has none).
func (r *Reader) ChangedAt(typeURL, n string) int64 {
	if t := r.d.tables[typeURL]; t != nil {
		if e := t.entries[n]; e != nil {
			return e.changed
		}
	}
	return 0
}

// Variants returns every variant of a resource.
func (r *Reader) Variants(typeURL, n string) []*resource.Variant {
	if vs, ok := r.prev(typeURL, n); ok {
		return vs
	}
	t := r.d.tables[typeURL]
	if t == nil {
		return nil
	}
	if e := t.entries[n]; e != nil {
		return e.variants
	}
	return nil
}

// All calls fn with the variant of every resource of a type that matches
// params (what a wildcard subscription covers), in name order.
func (r *Reader) All(typeURL string, params constraint.Params, fn func(*resource.Variant)) {
	t := r.d.tables[typeURL]
	for _, n := range r.Names(typeURL) {
		if r.stage != nil {
			if v := r.Get(typeURL, n, params); v != nil {
				fn(v)
			}
		} else if v := t.entries[n].selectVariant(params); v != nil {
			fn(v)
		}
	}
}

// Names lists the resources of a type that have variants, in order.
func (r *Reader) Names(typeURL string) []string {
	t := r.d.tables[typeURL]
	if t == nil {
		return r.stagedNames(typeURL, nil, func(string) bool { return true })
	}
	names := make([]string, 0, len(t.entries))
	for n, e := range t.entries {
		if len(e.variants) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return r.stagedNames(typeURL, names, func(string) bool { return true })
}

// GlobMembers calls fn with the variant matching params of every member of
// a glob collection, in name order.
func (r *Reader) GlobMembers(typeURL, globURL string, params constraint.Params, fn func(*resource.Variant)) {
	t := r.d.tables[typeURL]
	for _, n := range r.GlobNames(typeURL, globURL) {
		if r.stage != nil {
			if v := r.Get(typeURL, n, params); v != nil {
				fn(v)
			}
		} else if v := t.globs[globURL].members[n].selectVariant(params); v != nil {
			fn(v)
		}
	}
}

// GlobNames lists the members of a glob collection, in order.
func (r *Reader) GlobNames(typeURL, globURL string) []string {
	t := r.d.tables[typeURL]
	var names []string
	if t != nil && t.globs[globURL] != nil {
		g := t.globs[globURL]
		names = make([]string, 0, len(g.members))
		for n := range g.members {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	return r.stagedNames(typeURL, names, func(n string) bool { g, ok := InGlob(n); return ok && g == globURL })
}

// Types lists the types with contents, for admin listings.
func (r *Reader) Types() []string {
	var out []string
	for u, t := range r.d.tables {
		if len(t.entries) > 0 {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

// Everything calls fn with every variant held, for admin listings.
func (r *Reader) Everything(fn func(*resource.Variant)) {
	for _, u := range r.Types() {
		t := r.d.tables[u]
		for _, e := range t.entries {
			for _, v := range e.variants {
				fn(v)
			}
		}
	}
}
