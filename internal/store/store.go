package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// Store is the authoritative store.
type Store interface {
	// Apply applies a batch atomically: all of it lands in one new revision,
	// or none of it does. A batch that changes nothing (re-applying equal
	// content) creates no revision and returns the current one.
	Apply(ctx context.Context, b Batch) (Result, error)
	// Changes returns, without blocking, every change after revision since,
	// coalesced: each changed variant once, with its current content. When
	// since is negative (FromStart), older than the retained history, or
	// newer than the store (a store replaced under its reader), the result
	// is a Reset holding the whole state.
	Changes(ctx context.Context, since int64) (ChangeSet, error)
	// Updated returns a channel that is closed when a revision newer than
	// the current one commits. Take it before calling Changes, so that no
	// wake-up is lost.
	Updated() <-chan struct{}
	// Rev is the current revision.
	Rev() int64
	// Meta returns the value of a metadata key (see Batch.Meta), or nil
	// when the key is not set.
	Meta(ctx context.Context, key string) ([]byte, error)
	// Revisions lists the records of committed batches (when, who, what
	// changed), newest first, as far back as the store keeps history.
	Revisions(ctx context.Context, q HistoryQuery) (RevisionList, error)
	// StateAt returns the variants f selects as they were at revision rev,
	// each with the content and version it had then, sorted by key. It
	// fails with ErrCompacted for a revision older than the history kept,
	// and with ErrNoRevision for one the store has not reached.
	StateAt(ctx context.Context, rev int64, f Filter) ([]*resource.Variant, error)
	// Close releases the store. Acknowledged batches are durable.
	Close() error
}

// Checker is a store that can verify its own contents while it serves
// (bolt does).
type Checker interface {
	// Check reads the whole store and reports damage: what would make a
	// restart refuse it, or a backup of it useless.
	Check(ctx context.Context) error
}

// Prewriter is a store that can write a batch's payloads while the batch is
// still being read, so that its Apply has less left to do (bolt does).
type Prewriter interface {
	// Stage begins a prewrite; ctx bounds its writing in the background.
	Prewrite(ctx context.Context) Prewrite
}

// Prewrite is a batch being prewritten as it is read. Its methods are called
// from one goroutine.
type Prewrite interface {
	// Add hands over a put of the batch as it is read; the prewrite may
	// write its payload in the background. A small batch is never
	// written ahead.
	Add(v *resource.Variant)
	// Apply is the store's Apply of b, whose puts are the variants added
	// (in any order, with any Deletes and Meta), helped by what was
	// prewritten. What was prewritten is removed if it fails.
	Apply(ctx context.Context, b Batch) (Result, error)
	// Close removes what was prewritten and not applied: call it when the
	// batch is not applied, or always (after Apply it does nothing).
	Close() error
}

// Batch is one atomic change. The variants Put for a (type, name) replace
// all of that resource's stored variants: that is how a variant set changes
// atomically (docs/architecture.md §4.2).
type Batch struct {
	Puts    []*resource.Variant
	Deletes []Delete
	// Meta sets metadata keys in the same transaction as the puts and
	// deletes, so that what a writer records about its batches (what a
	// watched directory defined, for origin.DirWatcher) can never disagree
	// with what the store holds. A nil or empty value deletes the key.
	// Metadata is not versioned: it makes no revision and wakes no
	// watcher, so a batch that changes only metadata returns the current
	// revision, unchanged.
	Meta map[string][]byte
	// Audit is recorded with the revision the batch makes.
	Audit Audit
	// IfRev, when positive, applies the batch only if the store is still
	// at that revision, and fails with ErrConflict otherwise: a writer
	// that computed the batch from what it read (a rollback) does not
	// overwrite a change it has not seen.
	IfRev int64
	// Owned says that nothing but the store holds the batch's variants
	// (a batch just decoded for this apply): the store stamps each with
	// its version in place instead of copying it, which for 100,000
	// resources is 13 MB less at the batch's peak.
	Owned bool
	// Touch names variants that the batch changes even when it puts them
	// with the content they have: they get the new revision's version.
	// Promoting a staged revision does that to what the revision changed,
	// so that the promote is a revision of its own and every stream, in
	// the canary or not, ends on one version.
	Touch map[resource.Key]bool
}

// ErrConflict is the error of a batch whose IfRev is no longer the
// store's revision.
var ErrConflict = errors.New("the store changed since the batch was computed (another write came first); try again")

// CheckIfRev returns ErrConflict, with both revisions, when batch b may
// not apply to a store at revision cur.
func CheckIfRev(b Batch, cur int64) error {
	if b.IfRev > 0 && b.IfRev != cur {
		return fmt.Errorf("%w: computed at revision %d, the store is at %d", ErrConflict, b.IfRev, cur)
	}
	return nil
}

// MaxMetaKey is the longest metadata key, in bytes, that a batch may set.
const MaxMetaKey = 8 << 10

// Delete removes one variant of a resource, or all of them.
type Delete struct {
	Type string // type URL
	Name string // canonical name
	// All deletes every variant; otherwise only the one whose constraint key
	// is Constraints ("" being the unconstrained variant).
	All         bool
	Constraints string
}

func (d Delete) String() string {
	if d.All {
		return fmt.Sprintf("%s %s", d.Type, d.Name)
	}
	return resource.Key{Type: d.Type, Name: d.Name, Constraints: d.Constraints}.String()
}

// Result says what an Apply changed.
type Result struct {
	Rev     int64
	Puts    []resource.Key // variants created or changed
	Deletes []resource.Key // variants removed
}

// Changed reports whether the apply made a new revision.
func (r Result) Changed() bool { return len(r.Puts)+len(r.Deletes) > 0 }

// ChangeSet is a coalesced set of changes up to revision Rev.
type ChangeSet struct {
	Rev int64
	// Reset means Puts is the whole state at Rev: anything else the reader
	// holds is gone.
	Reset   bool
	Puts    []*resource.Variant
	Deletes []resource.Key
}

// Empty reports whether the change set carries nothing.
func (c ChangeSet) Empty() bool { return !c.Reset && len(c.Puts) == 0 && len(c.Deletes) == 0 }

// ErrClosed is returned after Close.
var ErrClosed = errors.New("store: closed")

// Version formats the version of a variant changed at revision rev: the
// revision itself for an unconstrained variant, and the revision with a
// short hash of the constraints for a TP2 variant ("7-1f0c9a2e"). Variants
// of one resource changed in one batch share the revision, so the hash is
// what lets a version name one of them: a reconnecting delta client lists
// a single version per name in initial_resource_versions (docs/protocol.md
// §2.9), and the server must tell which variant the client holds. The
// version is a function of the revision and constraints only, so replicas
// sharing a store agree on it.
func Version(rev int64, constraintsKey string) string {
	v := strconv.FormatInt(rev, 10)
	if constraintsKey == "" {
		return v
	}
	h := fnv.New32a()
	h.Write([]byte(constraintsKey))
	return fmt.Sprintf("%s-%08x", v, h.Sum32())
}

// Watcher follows a store's changes from a revision. It never queues:
// each Next returns everything since the previous one, coalesced, so a slow
// reader skips intermediate states instead of falling behind.
type Watcher struct {
	s   Store
	rev int64
}

// FromStart asks Changes and Watch for the whole state.
const FromStart = -1

// Watch returns a watcher that will report changes after revision from.
// With FromStart the first Next returns the whole state at once, even when
// it is empty.
func Watch(s Store, from int64) *Watcher { return &Watcher{s: s, rev: from} }

// Next blocks until there are changes after the last revision returned, and
// returns them.
func (w *Watcher) Next(ctx context.Context) (ChangeSet, error) {
	for {
		ch := w.s.Updated()
		cs, err := w.s.Changes(ctx, w.rev)
		if err != nil {
			return ChangeSet{}, err
		}
		if !cs.Empty() {
			w.rev = cs.Rev
			return cs, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ChangeSet{}, ctx.Err()
		}
	}
}

// Rev is the revision of the last change set returned.
func (w *Watcher) Rev() int64 { return w.rev }

// Reader is what planning needs from a backend's transaction.
type Reader interface {
	// Variants returns the stored variants of one resource.
	Variants(typeURL, name string) ([]*resource.Variant, error)
}

// Plan is the change a batch makes to the current state. Computing it is
// shared by every backend, so they all mean the same by a batch.
type Plan struct {
	Puts    []*resource.Variant // new or changed variants, stamped with the new revision
	Deletes []resource.Key
	// Meta is the batch's metadata, copied from the caller's: a nil value
	// deletes its key. It is written with the resources whether or not
	// they change, and does not count towards Empty.
	Meta map[string][]byte
	// Prev holds, for each key of Puts and Deletes that had a variant
	// before the batch, that variant: what undoing the revision restores
	// (or what a Reader that is a PrevKeeper keeps instead).
	Prev map[resource.Key]*resource.Variant
}

// Empty reports whether the batch changes no resource, so makes no
// revision.
func (p Plan) Empty() bool { return len(p.Puts)+len(p.Deletes) == 0 }

// Result describes the plan as applied at rev.
func (p Plan) Result(rev int64) Result {
	r := Result{Rev: rev}
	if len(p.Puts) > 0 {
		r.Puts = make([]resource.Key, 0, len(p.Puts))
	}
	for _, v := range p.Puts {
		r.Puts = append(r.Puts, v.Key())
	}
	r.Deletes = append(r.Deletes, p.Deletes...)
	return r
}

// BatchError lists every reason a batch was rejected. errors.As finds the
// constraint.OverlapError or KeySetError behind a TP2 violation.
type BatchError struct{ Problems []error }

func (e *BatchError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	if len(msgs) == 1 {
		return "batch rejected: " + msgs[0]
	}
	return "batch rejected:\n  " + strings.Join(msgs, "\n  ")
}

// Unwrap returns the problems.
func (e *BatchError) Unwrap() []error { return e.Problems }

// MakePlan computes what batch b changes given the current state r; new or
// changed variants get version rev. It rejects, with every problem listed, a
// batch that names a variant twice, both puts and deletes one resource, or
// leaves a resource whose variants violate TP2's rules, or sets a metadata
// key that is empty or longer than MaxMetaKey.
func MakePlan(r Reader, b Batch, rev int64) (Plan, error) {
	pl := &planner{r: r, b: b, rev: rev, same: (*resource.Variant).SameContent}
	if cc, ok := r.(ContentComparer); ok {
		pl.same = cc.SameContent
	}
	pl.meta()
	pl.groupPuts()
	if err := pl.puts(); err != nil {
		return Plan{}, err
	}
	if err := pl.deletes(); err != nil {
		return Plan{}, err
	}
	pl.checkVariants()
	if len(pl.problems) > 0 {
		sort.Slice(pl.problems, func(i, j int) bool { return pl.problems[i].Error() < pl.problems[j].Error() })
		return Plan{}, &BatchError{Problems: pl.problems}
	}
	return pl.p, nil
}

// planner is MakePlan's work in progress, step by step: the batch's
// metadata, its puts grouped by resource, what they change, its deletes,
// and the TP2 check of every resource left with several variants.
type planner struct {
	r    Reader
	b    Batch
	rev  int64
	same func(old, v *resource.Variant) bool // ContentComparer's, or the variants'

	p        Plan
	problems []error
	// The batch's puts by resource, and the resources in batch order.
	order   []group
	grouped map[group][]*resource.Variant
	// What each resource holds after the batch, where checkVariants
	// needs it: a resource left with several variants (the puts of one
	// that is deleted as well are a problem of their own).
	final map[group][]*resource.Variant
}

// group names a resource: its variants are checked together.
type group struct{ typ, name string }

// meta takes the batch's metadata, refusing keys that are empty or longer
// than MaxMetaKey.
func (pl *planner) meta() {
	for k, v := range pl.b.Meta {
		if k == "" || len(k) > MaxMetaKey {
			pl.problems = append(pl.problems, fmt.Errorf("metadata key of %d bytes (want 1 to %d)", len(k), MaxMetaKey))
			continue
		}
		if pl.p.Meta == nil {
			pl.p.Meta = make(map[string][]byte, len(pl.b.Meta))
		}
		if len(v) == 0 {
			pl.p.Meta[k] = nil
		} else {
			pl.p.Meta[k] = bytes.Clone(v)
		}
	}
}

// groupPuts groups the batch's puts by resource, refusing a variant
// without type or name, a name with a NUL, and a variant given twice.
func (pl *planner) groupPuts() {
	pl.order = make([]group, 0, len(pl.b.Puts))
	pl.grouped = make(map[group][]*resource.Variant, len(pl.b.Puts))
	for _, v := range pl.b.Puts {
		if v == nil || v.Type == nil || v.Name == "" {
			pl.problems = append(pl.problems, errors.New("a variant without type or name"))
			continue
		}
		if strings.IndexByte(v.Name, 0) >= 0 {
			pl.problems = append(pl.problems, fmt.Errorf("name %q holds a NUL byte", v.Name))
			continue
		}
		// (A variant given twice is found among its resource's, which
		// are few: a map of every key took 8 MB for 100,000 resources.)
		g := group{v.Type.URL, v.Name}
		vs, ok := pl.grouped[g]
		if !ok {
			pl.order = append(pl.order, g)
		}
		if slices.ContainsFunc(vs, func(o *resource.Variant) bool { return o.Constraints.Key() == v.Constraints.Key() }) {
			pl.problems = append(pl.problems, fmt.Errorf("%s is given twice", v.Key()))
			continue
		}
		pl.grouped[g] = append(vs, v)
	}
}

// puts plans each resource the batch puts, in batch order: a put equal
// to the stored variant keeps it (and its version), a changed or new one
// gets version rev, and a stored variant the batch does not put again is
// deleted.
func (pl *planner) puts() error {
	pl.final = map[group][]*resource.Variant{}
	for _, g := range pl.order {
		old, err := pl.r.Variants(g.typ, g.name)
		if err != nil {
			return err
		}
		if next := pl.putResource(old, pl.grouped[g]); len(next) > 1 {
			pl.final[g] = next
		}
	}
	return nil
}

// putResource plans the puts of one resource over its stored variants
// old, and returns its variants after the batch.
func (pl *planner) putResource(old, puts []*resource.Variant) []*resource.Variant {
	var oldBy map[string]*resource.Variant // (nil, read as empty, for a new resource)
	if len(old) > 0 {
		oldBy = make(map[string]*resource.Variant, len(old))
	}
	for _, o := range old {
		oldBy[o.Constraints.Key()] = o
	}
	var next []*resource.Variant
	for _, v := range puts {
		ck := v.Constraints.Key()
		if o, ok := oldBy[ck]; ok && !pl.touched(v) && pl.same(o, v) {
			next = append(next, o) // unchanged: keeps its version
			delete(oldBy, ck)
			continue
		}
		if o, ok := oldBy[ck]; ok {
			pl.p.prev(pl.r, o)
		}
		delete(oldBy, ck)
		nv := v
		if pl.b.Owned {
			v.Version = Version(pl.rev, ck)
		} else {
			nv = v.WithVersion(Version(pl.rev, ck))
		}
		next = append(next, nv)
		pl.p.Puts = append(pl.p.Puts, nv)
	}
	for _, o := range sortedVariants(oldBy) {
		pl.p.Deletes = append(pl.p.Deletes, o.Key())
		pl.p.prev(pl.r, o)
	}
	return next
}

// touched reports whether the batch touches v (Batch.Touch).
func (pl *planner) touched(v *resource.Variant) bool {
	return pl.b.Touch != nil && pl.b.Touch[v.Key()]
}

// deletes plans the batch's deletes, refusing one of a resource the batch
// also puts.
func (pl *planner) deletes() error {
	deleted := map[resource.Key]bool{}
	for _, d := range pl.b.Deletes {
		g := group{d.Type, d.Name}
		if _, ok := pl.grouped[g]; ok {
			pl.problems = append(pl.problems, fmt.Errorf("%s %s is both put and deleted", d.Type, d.Name))
			continue
		}
		old, ok := pl.final[g]
		if !ok {
			var err error
			if old, err = pl.r.Variants(d.Type, d.Name); err != nil {
				return err
			}
		}
		var keep []*resource.Variant
		for _, o := range old {
			k := o.Key()
			if (d.All || k.Constraints == d.Constraints) && !deleted[k] {
				deleted[k] = true
				pl.p.Deletes = append(pl.p.Deletes, k)
				pl.p.prev(pl.r, o)
				continue
			}
			keep = append(keep, o)
		}
		pl.final[g] = keep
	}
	return nil
}

// checkVariants refuses every resource left with variants that break
// TP2's rules (constraint.ValidateVariants).
func (pl *planner) checkVariants() {
	for g, vs := range pl.final {
		if len(vs) < 2 {
			continue
		}
		cv := make([]constraint.Variant, len(vs))
		for i, v := range vs {
			id := v.Constraints.String()
			if id == "" {
				id = "(unconstrained)"
			}
			cv[i] = constraint.Variant{ID: strconv.Quote(id), Constraints: v.Constraints}
		}
		if err := constraint.ValidateVariants(cv); err != nil {
			pl.problems = append(pl.problems, fmt.Errorf("%s %s: %w", resource.ForURL(g.typ).Name, g.name, err))
		}
	}
}

func (p *Plan) prev(r Reader, o *resource.Variant) {
	if p.Prev == nil {
		p.Prev = map[resource.Key]*resource.Variant{}
	}
	k := o.Key()
	if pk, ok := r.(PrevKeeper); ok {
		o = pk.KeepPrev(o)
	}
	p.Prev[k] = o
}

// ContentComparer is a Reader whose variants may come without their
// payloads (bolt's, so that planning a batch copies nothing it compares
// with): it tells whether the stored variant old has v's content, as
// resource.Variant.SameContent would.
type ContentComparer interface {
	SameContent(old, v *resource.Variant) bool
}

// PrevKeeper is a Reader that says what a plan keeps, in Plan.Prev, of a
// variant the batch replaces or removes. bolt keeps one placeholder for
// all: it rewinds from the records in its file, and a batch that changes
// 100,000 resources would otherwise hold all their old payloads until
// its commit.
type PrevKeeper interface {
	KeepPrev(*resource.Variant) *resource.Variant
}

func sortedVariants(m map[string]*resource.Variant) []*resource.Variant {
	out := make([]*resource.Variant, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Constraints.Key() < out[j].Constraints.Key() })
	return out
}

// Notifier wakes watchers: Updated hands out the current channel; a commit
// closes it and makes a new one. Guard it with the backend's lock.
type Notifier struct{ ch chan struct{} }

// C returns the channel the next Wake closes.
func (n *Notifier) C() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Wake closes the current channel.
func (n *Notifier) Wake() {
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}

// Coalesce builds the change set for the keys changed after some revision
// (in commit order, possibly repeated): each key once, as a put of its
// current variant or a delete. get returns the current variant, or nil.
func Coalesce(rev int64, keys []resource.Key, get func(resource.Key) (*resource.Variant, error)) (ChangeSet, error) {
	cs := ChangeSet{Rev: rev}
	seen := make(map[resource.Key]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		v, err := get(k)
		if err != nil {
			return ChangeSet{}, err
		}
		if v != nil {
			cs.Puts = append(cs.Puts, v)
		} else {
			cs.Deletes = append(cs.Deletes, k)
		}
	}
	return cs, nil
}
