package protocol

import (
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"
	"weak"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// held is what the client holds (delta) or was last sent (SotW) under one
// name: usually one variant, several when one stream subscribes a name with
// several parameter sets (a relay).
type held struct {
	variants []heldVariant
	// absent records that the client was told the name does not exist
	// (delta removed_resources, an empty glob, or a VHDS not-found answer),
	// so that it is not told again.
	absent bool
}

type heldVariant struct {
	ckey    string
	version string
	v       *resource.Variant // nil when known only from initial_resource_versions
	tp2     bool              // sent with its constraints
}

// Nack is the last NACK a client sent for a type.
type Nack struct {
	Nonce string `json:"nonce"`
	// Version is the rejected version: the one sent with Nonce.
	Version string `json:"version"`
	// LastGood is the version the client still holds (its last ACK).
	LastGood string    `json:"last_good_version,omitempty"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

// typeState is a stream's state for one resource type.
type typeState struct {
	typ  *resource.Type
	ws   *watchSet // the subscriptions, shared with streams subscribed alike
	held *heldSet
	// dncSince is, for a caching proxy (cachepolicy.Policy.HonorDoNotCache), the db
	// revision each watch began at: a do_not_cache copy older than the
	// watch is not sent to it.
	dncSince map[db.Key]int64

	// SotW: whether any request named resources (docs/protocol.md §1.5), and
	// the last request that changed the names, to skip repeats quickly.
	everNamed  bool
	lastReq    [2]uint64
	hasLastReq bool

	// Work to do: names whose contents changed, or all (a subscription
	// change); names that must be sent even if unchanged (docs/protocol.md §1.6,
	// §2.2); and whether a response is due even when empty (the first
	// request for a type).
	dirty        map[string]struct{}
	dirtyAll     bool
	force        map[string]struct{} // names
	forceWatches map[db.Key]struct{} // everything a new watch covers
	mustReply    bool
	// deniedAnswer: names the policy denies that a delta request
	// subscribed, to be answered as removed once and then forgotten.
	deniedAnswer map[string]struct{}
	since        time.Time

	// Nonces and acknowledgements.
	nonce       string
	sentVersion string
	sentAt      time.Time
	recent      []sent // delta: the last responses sent, any of which the client may ACK (a ring once full: newest)
	recentNext  uint8  // where the next goes once recent is full: the oldest
	ackVersion  string
	ackNonce    string
	ackAt       time.Time
	nack        *Nack
	nacks       int

	metrics *typeCounters // this type's counters, looked up once

	// TTL heartbeats (delta, clients that support TTLs): a round every
	// hbEvery (half the shortest TTL sent), the last at hbAt; beat marks a
	// round due.
	hbEvery time.Duration
	hbAt    time.Time
	beat    bool

	// SotW full state: since when it has waited for names the source has
	// not answered, and whether the timer must look again (Policy.PendingWait).
	pendingSince time.Time
	recheck      bool
}

// sent is a delta response a client may still ACK or NACK.
type sent struct{ nonce, version string }

// typeCounters are the per-type metrics a stream bumps on every request.
type typeCounters struct{ acks, nacks, stale, pushes, resources, bytes prometheus.Counter }

func (ts *typeState) counters(m *metrics) *typeCounters {
	if ts.metrics == nil {
		ts.metrics = m.forType(TypeLabel(ts.typ))
	}
	return ts.metrics
}

// TypeLabel is a type's metrics label: its name, or "other" for a type
// xdsd does not know, so that clients naming made-up types cannot mint
// series (docs/architecture.md §6).
func TypeLabel(t *resource.Type) string {
	if !t.Known {
		return "other"
	}
	return t.Name
}

func newTypeState(t *resource.Type) *typeState {
	return &typeState{typ: t, ws: noWatches, held: emptyHeld}
}

// watchSet is a type state's subscriptions, with what derives from them:
// the watches in order; the named ones by name and the wildcard and glob
// ones, so a change looks only at the watches covering it; and an interned
// signature, under which streams subscribed alike share their computations
// (memo). A set is immutable and interned by its signature, so an idle
// fleet subscribed alike keeps one (docs/architecture.md §5: nothing per stream that
// can be shared).
type watchSet struct {
	m       map[db.Key]*db.Sub
	sorted  []*db.Sub
	byName  map[string][]*db.Sub
	special []*db.Sub
	sig     unique.Handle[string]
}

var noWatches = &watchSet{m: map[db.Key]*db.Sub{}, byName: map[string][]*db.Sub{}, sig: unique.Make("")}

// watchSets interns a Server's watch sets: a signature (with the type) →
// a weak pointer to its set; a set nobody holds is collected, and its
// entry with it. Each Server has its own, so servers in one process share
// nothing that changes.
type watchSets struct{ m sync.Map }

// sortWatches returns m's watches in order with their signature.
func sortWatches(m map[db.Key]*db.Sub) ([]*db.Sub, unique.Handle[string], map[db.Key]*db.Sub) {
	sorted := make([]*db.Sub, 0, len(m))
	for _, w := range m {
		sorted = append(sorted, w)
	}
	slices.SortFunc(sorted, func(a, b *db.Sub) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.ParamsKey, b.ParamsKey); c != 0 {
			return c
		}
		if a.Locator == b.Locator {
			return 0
		}
		if b.Locator {
			return -1
		}
		return 1
	})
	n := 0
	for _, w := range sorted {
		n += len(w.Name) + len(w.ParamsKey) + 3
	}
	var b strings.Builder
	b.Grow(n)
	for _, w := range sorted {
		b.WriteString(w.Name)
		b.WriteByte(0)
		b.WriteString(w.ParamsKey)
		if w.Locator {
			b.WriteByte(1)
		}
		b.WriteByte(0)
	}
	return sorted, unique.Make(b.String()), m
}

// makeWatchSet indexes sorted watches (the signature is per type: the
// type's watches are in one table).
func makeWatchSet(sorted []*db.Sub, sig unique.Handle[string], m map[db.Key]*db.Sub) *watchSet {
	ws := &watchSet{m: m, sorted: sorted, byName: make(map[string][]*db.Sub, len(sorted)), sig: sig}
	for _, w := range sorted {
		if w.IsCollection() {
			ws.special = append(ws.special, w)
		} else {
			ws.byName[w.Name] = append(ws.byName[w.Name], w)
		}
	}
	return ws
}

// intern returns the set with m's watches of type typeURL, shared with
// every stream of the type that has the same ones.
func (sets *watchSets) intern(typeURL string, m map[db.Key]*db.Sub) *watchSet {
	sorted, sig, m := sortWatches(m)
	key := internKey{typeURL, sig}
	for {
		v, ok := sets.m.Load(key)
		if ok {
			if old := v.(weak.Pointer[watchSet]).Value(); old != nil {
				return old
			}
			sets.m.CompareAndDelete(key, v)
			continue
		}
		ws := makeWatchSet(sorted, sig, m)
		wp := weak.Make(ws)
		if _, loaded := sets.m.LoadOrStore(key, wp); loaded {
			continue // another stream interned it first: use that one
		}
		runtime.AddCleanup(ws, func(struct{}) { sets.m.CompareAndDelete(key, wp) }, struct{}{})
		return ws
	}
}

type internKey struct {
	typeURL string
	sig     unique.Handle[string]
}

func (ts *typeState) sinceOf(w *db.Sub) int64 {
	return ts.dncSince[w.Key]
}

// heldSet is what a client holds of one type, by name. Streams in step
// share one (see memo), so it is copy-on-write: a shared set is never
// changed, only replaced.
type heldSet struct {
	m      map[string]*held
	shared bool
}

// emptyHeld is every new type state's set, shared so that streams that
// subscribe alike start in step.
var emptyHeld = &heldSet{m: map[string]*held{}, shared: true}

func (h *heldSet) get(n string) *held { return h.m[n] }
func (h *heldSet) len() int           { return len(h.m) }

// writable returns a set the caller may change: h itself, or a copy if h
// is shared.
func (h *heldSet) writable() *heldSet {
	if !h.shared {
		return h
	}
	m := make(map[string]*held, len(h.m)+1)
	for k, v := range h.m {
		m[k] = v
	}
	return &heldSet{m: m}
}

func (ts *typeState) setHeld(n string, h *held) {
	ts.held = ts.held.writable()
	ts.held.m[n] = h
}

func (ts *typeState) delHeld(n string) {
	if _, ok := ts.held.m[n]; !ok {
		return
	}
	ts.held = ts.held.writable()
	delete(ts.held.m, n)
}

func (ts *typeState) markDirty(n string, at time.Time) {
	if ts.dirty == nil {
		ts.dirty = map[string]struct{}{}
	}
	ts.dirty[n] = struct{}{}
	ts.touch(at)
}

func (ts *typeState) markAll(at time.Time) {
	ts.dirtyAll = true
	ts.touch(at)
}

// markRequested makes a request's answer due. It does not start the
// apply-to-send clock: that measures changes of contents, not requests.
func (ts *typeState) markRequested() { ts.dirtyAll = true }

func (ts *typeState) touch(at time.Time) {
	if ts.since.IsZero() || at.Before(ts.since) {
		ts.since = at
	}
}

func (ts *typeState) forceName(n string) {
	if ts.force == nil {
		ts.force = map[string]struct{}{}
	}
	ts.force[n] = struct{}{}
}

func (ts *typeState) forceWatch(w *db.Sub) {
	if ts.forceWatches == nil {
		ts.forceWatches = map[db.Key]struct{}{}
	}
	ts.forceWatches[w.Key] = struct{}{}
}

func (ts *typeState) forced(w *db.Sub, n string) bool {
	if _, ok := ts.forceWatches[w.Key]; ok {
		return true
	}
	_, ok := ts.force[n]
	return ok
}

func (ts *typeState) busy() bool {
	return ts.dirtyAll || len(ts.dirty) > 0 || len(ts.force) > 0 || len(ts.forceWatches) > 0 || ts.mustReply || len(ts.deniedAnswer) > 0
}

// want is the desired state for a set of names: what the client should hold.
type want struct {
	byName map[string][]item
	absent map[string]bool // explicitly watched names that do not exist → forced
	// noMatch: TP2 watches of a name that has variants, none matching the
	// watch's parameters (a relay's second parameter set). When another
	// watch of the name is answered, the name is not absent, but these are
	// still told: "no variant for these parameters" (computeDelta).
	noMatch map[string][]noMatch
	globs   map[string]bool // glob watches with no member → forced
	order   []string
	// pending: some watched name is not known yet (a cache miss a relay is
	// still fetching): nothing may be said about it, and a response that
	// would (a SotW full state, a wildcard's first answer) waits.
	pending         bool
	pendingWildcard bool
	// pendingNames and pendingGlobs: which named and glob watches are
	// pending. A name held by the client and pending now (a relay that
	// let go of it and is fetching it again) is neither kept nor removed:
	// nothing is said of it until the source answers.
	pendingNames map[string]bool
	pendingGlobs map[string]bool
}

// isPending reports whether n is subscribed but not known yet, by name,
// through a pending glob, or through a pending wildcard.
func (w *want) isPending(n string) bool {
	if w.pendingNames[n] || w.pendingWildcard {
		return true
	}
	if len(w.pendingGlobs) > 0 {
		if g, ok := db.InGlob(n); ok && w.pendingGlobs[g] {
			return true
		}
	}
	return false
}

func mark(m *map[string]bool, n string) {
	if *m == nil {
		*m = map[string]bool{}
	}
	(*m)[n] = true
}

type noMatch struct {
	params constraint.Params
	forced bool
}

func (w *want) add(it item) {
	if w.byName == nil {
		w.byName = map[string][]item{}
	}
	list, seen := w.byName[it.name]
	if !seen {
		w.order = append(w.order, it.name)
	}
	for i, o := range list {
		if o.v == it.v {
			// The same variant through two watches: one item, the union
			// of what the watches ask for.
			list[i].tp2 = o.tp2 || it.tp2
			list[i].wrap = o.wrap || it.wrap
			list[i].ttl = o.ttl || it.ttl
			list[i].forced = o.forced || it.forced
			list[i].aliases = appendNew(o.aliases, it.aliases...)
			return
		}
	}
	w.byName[it.name] = append(list, it)
}

func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		found := false
		for _, l := range list {
			if l == a {
				found = true
				break
			}
		}
		if !found {
			list = append(list, a)
		}
	}
	return list
}

// intent is how a stream asks desire for what its client should hold.
type intent struct {
	// only, when non-nil, limits the computation to these names (and the
	// wildcard and glob watches named by them); nil is every watch.
	only map[string]struct{}
	// sotw: the stream is State of the World, where on-demand VHDS
	// watches are plain named ones.
	sotw bool
	// wrapAll: every resource goes wrapped, with its constraints (a SotW
	// client that takes wrapped resources).
	wrapAll bool
	// ttl: resources with a TTL are sent with it.
	ttl bool
	// honorDNC: a do_not_cache resource a named watch asked for is not
	// sent from the cache, but waited for (db.Reader.ChangedAt).
	honorDNC bool
	// hidden, if set, names what the policy denies the client: answered
	// as if it did not exist.
	hidden func(string) bool
	// node is the stream's node id: with a revision staged, it and each
	// watch's parameters say whether the watch is answered from the
	// canary's view or from the view outside it (db.Reader.Outside).
	node string
}

// desire computes what the client should hold: for every watch, or only
// for in.only's names.
func (ts *typeState) desire(r *db.Reader, in intent) *want {
	d := &desirer{ts: ts, r: r, in: in, typeURL: ts.typ.URL,
		w: &want{absent: map[string]bool{}, globs: map[string]bool{}}}
	stage := r.Stage()
	for _, wt := range d.watches() {
		if stage != nil {
			d.r = viewOf(r, in.node, wt.Params)
		}
		k := wt.Kind
		if k == db.VHDS && in.sotw {
			// On-demand VHDS is delta only (docs/protocol.md §5.1): its answers
			// need aliases, and a not-found one has no payload, which SotW
			// cannot carry. SotW asks for virtual hosts by name.
			k = db.Named
		}
		switch k {
		case db.AllOfType:
			d.allOfType(wt)
		case db.Glob:
			d.glob(wt)
		case db.VHDS:
			d.vhds(wt)
		default:
			d.named(wt)
		}
	}
	return d.w
}

// viewOf is the view a stream with node id node reads a subscription
// with parameters params through: with a revision staged, the canary's
// (r) or the one outside it (db.Reader.Outside).
func viewOf(r *db.Reader, node string, params constraint.Params) *db.Reader {
	if st := r.Stage(); st != nil && !st.Canary.Match(node, params) {
		return r.Outside()
	}
	return r
}

// desirer is one computation of desire.
type desirer struct {
	ts        *typeState
	r         *db.Reader
	in        intent
	typeURL   string
	onlyNames []string // in.only, sorted
	w         *want
}

// watches returns the watches to look at: a change looks only at those
// that cover its names, in a fixed order, so identical streams compute
// identical responses.
func (d *desirer) watches() []*db.Sub {
	if d.in.only == nil {
		return d.ts.ws.sorted
	}
	d.onlyNames = make([]string, 0, len(d.in.only))
	for n := range d.in.only {
		d.onlyNames = append(d.onlyNames, n)
	}
	sort.Strings(d.onlyNames)
	watches := append([]*db.Sub(nil), d.ts.ws.special...)
	for _, n := range d.onlyNames {
		watches = append(watches, d.ts.ws.byName[n]...)
	}
	return watches
}

func (d *desirer) denied(v *resource.Variant) bool {
	return v != nil && d.in.hidden != nil && d.in.hidden(v.Name)
}

// covers reports whether the computation concerns name n.
func (d *desirer) covers(n string) bool {
	if d.in.only == nil {
		return true
	}
	_, ok := d.in.only[n]
	return ok
}

// whole says a wildcard or glob watch is looked at whole: on a full
// computation, or when its own name changed (a cache learned that the
// source answered it, possibly with nothing).
func (d *desirer) whole(wt *db.Sub) bool { return d.covers(wt.Name) }

// add adds v, which watch wt asked for (as alias, if not ""), to what
// the client should hold.
func (d *desirer) add(v *resource.Variant, wt *db.Sub, alias string) {
	if d.denied(v) {
		return
	}
	ts, w := d.ts, d.w
	if d.in.honorDNC && v.DoNotCache && wt.Kind == db.Named && d.r.ChangedAt(d.typeURL, v.Name) <= ts.sinceOf(wt) {
		// A copy fetched for this subscription is on its way: until it
		// comes, nothing is said of the name (a SotW full state waits).
		// (A wildcard or glob cannot fetch one member afresh; its
		// subscribers get the cached copy.)
		w.pending = true
		mark(&w.pendingNames, v.Name)
		return
	}
	it := item{v: v, name: v.Name, tp2: wt.Locator, wrap: wt.Locator || d.in.wrapAll, ttl: d.in.ttl && v.TTL > 0}
	if d.in.wrapAll {
		// A SotW client that takes wrapped resources is sent the
		// constraints too (docs/architecture.md §4.5).
		it.tp2 = true
	}
	if alias != "" {
		it.aliases = []string{alias}
	}
	it.forced = ts.forced(wt, it.name) || (alias != "" && ts.forced(wt, alias))
	w.add(it)
}

// allOfType answers a wildcard watch.
func (d *desirer) allOfType(wt *db.Sub) {
	if d.typeURL == resource.VirtualHostURL {
		// On-demand VHDS: the wildcard (namespace) subscription's base
		// set is empty; base virtual hosts come inline in the route
		// configuration (README "On-demand VHDS").
		return
	}
	if !d.r.Known(*wt) {
		d.w.pending, d.w.pendingWildcard = true, true
		return
	}
	if d.whole(wt) {
		d.r.All(d.typeURL, wt.Params, func(v *resource.Variant) { d.add(v, wt, "") })
		return
	}
	for _, n := range d.onlyNames {
		if v := d.r.Get(d.typeURL, n, wt.Params); v != nil {
			d.add(v, wt, "")
		}
	}
}

// glob answers a glob watch (an xdstp collection).
func (d *desirer) glob(wt *db.Sub) {
	found := false
	forced := d.ts.forced(wt, wt.Name)
	if d.whole(wt) || forced {
		// A member the policy denies counts as absent, so that a glob
		// whose members are all denied is answered exactly as an empty
		// one, showing nothing of them (issue 27).
		d.r.GlobMembers(d.typeURL, wt.Name, wt.Params, func(v *resource.Variant) {
			if !d.denied(v) {
				d.add(v, wt, "")
				found = true
			}
		})
		switch {
		case found:
		case d.r.Known(*wt):
			d.w.globs[wt.Name] = forced
		default:
			d.w.pending = true
			mark(&d.w.pendingGlobs, wt.Name)
		}
		return
	}
	for _, n := range d.onlyNames {
		if g, ok := db.InGlob(n); ok && g == wt.Name {
			if v := d.r.Get(d.typeURL, n, wt.Params); v != nil {
				d.add(v, wt, "")
			}
		}
	}
}

// vhds answers an on-demand VHDS watch of a delta stream: the virtual
// host a domain resolves to, under the domain as its alias.
func (d *desirer) vhds(wt *db.Sub) {
	if v := d.r.ResolveVirtualHost(wt.Name, wt.Params); v != nil && !d.denied(v) {
		d.add(v, wt, wt.Name)
	} else if d.denied(v) || d.r.Known(*wt) {
		d.w.add(item{name: wt.Name, aliases: []string{wt.Name}, forced: d.ts.forced(wt, wt.Name)})
	} else {
		d.w.pending = true
	}
}

// named answers a watch of one name: the variant that matches its
// parameters, or that it is absent (and, for a TP2 watch, that no
// variant matches), or that it is not known yet.
func (d *desirer) named(wt *db.Sub) {
	ts, w := d.ts, d.w
	if !d.covers(wt.Name) && !ts.forced(wt, wt.Name) {
		return
	}
	if v := d.r.Get(d.typeURL, wt.Name, wt.Params); v != nil && !d.denied(v) {
		d.add(v, wt, "")
	} else if d.denied(v) || d.r.Known(*wt) {
		forced := ts.forced(wt, wt.Name)
		w.absent[wt.Name] = w.absent[wt.Name] || forced
		if wt.Locator {
			if w.noMatch == nil {
				w.noMatch = map[string][]noMatch{}
			}
			w.noMatch[wt.Name] = append(w.noMatch[wt.Name], noMatch{wt.Params, forced})
		}
	} else {
		w.pending = true
		mark(&w.pendingNames, wt.Name)
	}
}

// same reports whether the client already holds exactly it.
func (h *held) has(it item) bool {
	if h == nil {
		return false
	}
	if it.v == nil {
		return h.absent
	}
	for _, hv := range h.variants {
		if hv.v == nil {
			// Known from initial_resource_versions: the version alone
			// identifies the content (a version is a store revision).
			if hv.version == it.v.Version {
				return true
			}
			continue
		}
		// Held with its constraints serves a plain want too (a client that
		// drops a locator but keeps the plain name already has it).
		if hv.ckey == it.v.Constraints.Key() && hv.version == it.v.Version && (hv.tp2 || !it.tp2) {
			return true
		}
	}
	return false
}

func heldFrom(items []item) *held {
	h := &held{}
	for _, it := range items {
		if it.v == nil {
			h.absent = true
			continue
		}
		h.variants = append(h.variants, heldVariant{ckey: it.v.Constraints.Key(), version: it.v.Version, v: it.v, tp2: it.tp2})
	}
	return h
}

// version renders a SotW version_info: the db revision the response was
// computed at. It grows with every change, so a client's ACKed version says
// how current it is.
func versionOf(rev int64) string { return strconv.FormatInt(rev, 10) }

// remember records a delta response sent, in place of the oldest of the
// last maxRecent. A ring in an array made once: shifting the window along
// (16 strings pairs, with write barriers) was 5 % of a delta fan-out's
// CPU.
func (ts *typeState) remember(x sent) {
	if len(ts.recent) < maxRecent {
		if ts.recent == nil {
			ts.recent = make([]sent, 0, maxRecent)
		}
		ts.recent = append(ts.recent, x)
		return
	}
	ts.recent[ts.recentNext] = x
	ts.recentNext = (ts.recentNext + 1) % maxRecent
}

// newest is the k-th newest of the responses remembered (0: the last
// sent), for k < len(ts.recent).
func (ts *typeState) newest(k int) *sent {
	i := int(ts.recentNext) - 1 - k
	if i < 0 {
		i += len(ts.recent)
	}
	return &ts.recent[i]
}
