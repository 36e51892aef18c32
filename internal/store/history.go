package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/xdsd/xdsd/resource"
)

// History. Every backend keeps, for each revision it still holds, a
// Revision record (when, who, what changed) and the undo data of the
// revision: the variants its changes replaced or removed (Plan.Prev).
// The state at an earlier revision is the current state with the newer
// revisions undone, newest first (Rewinder). History is never rewritten:
// a rollback is a new batch that puts back what StateAt returned. The
// same retention bounds the history and the change log that watchers
// resume from; older revisions are compacted away.

// Audit says who made a batch, recorded with its revision.
type Audit struct {
	// Who is the writer's identity: an admin token's name or a client
	// certificate's identity; empty when the writer was not identified.
	Who string `json:"who,omitempty"`
	// From is where the write came from (the admin client's address).
	From string `json:"from,omitempty"`
	// Via says what made the batch: "apply", "delete", "watch DIR",
	// "rollback to N", or an embedding program's own word.
	Via string `json:"via,omitempty"`
	// Stage, when set, marks the revision as staged for a canary, or as
	// the promote or abort of one (stage.go).
	Stage *Stage `json:"stage,omitempty"`
}

// Op is what a revision did to one variant.
type Op string

// The operations of a Change.
const (
	Created Op = "created"
	Updated Op = "updated"
	Deleted Op = "deleted"
)

// Change is one variant a revision created, updated or deleted.
type Change struct {
	Key resource.Key
	Op  Op
	// Version is the version the change gave the variant ("" for a
	// delete).
	Version string
}

type changeJSON struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Constraints string `json:"constraints,omitempty"`
	Op          Op     `json:"op"`
	Version     string `json:"version,omitempty"`
}

// MarshalJSON writes the key's fields inline.
func (c Change) MarshalJSON() ([]byte, error) {
	return json.Marshal(changeJSON{c.Key.Type, c.Key.Name, c.Key.Constraints, c.Op, c.Version})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Change) UnmarshalJSON(b []byte) error {
	var j changeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	switch j.Op {
	case Created, Updated, Deleted:
	default:
		return fmt.Errorf("unknown change operation %q", j.Op)
	}
	*c = Change{Key: resource.Key{Type: j.Type, Name: j.Name, Constraints: j.Constraints}, Op: j.Op, Version: j.Version}
	return nil
}

// Revision records one committed batch.
type Revision struct {
	Rev   int64     `json:"rev"`
	Time  time.Time `json:"time"`
	Audit Audit     `json:"audit"`
	// Changes lists what the batch changed, sorted by key (in a
	// RevisionList, only what the query's filter selects).
	Changes []Change `json:"changes"`
	// Total is the number of variants the batch changed.
	Total int `json:"total"`
}

// NewRevision makes the record of plan p committed as revision rev.
func NewRevision(rev int64, at time.Time, a Audit, p Plan) Revision {
	r := Revision{Rev: rev, Time: at.UTC(), Audit: a, Changes: make([]Change, 0, len(p.Puts)+len(p.Deletes))}
	for _, v := range p.Puts {
		op := Created
		if p.Prev[v.Key()] != nil {
			op = Updated
		}
		r.Changes = append(r.Changes, Change{Key: v.Key(), Op: op, Version: v.Version})
	}
	for _, k := range p.Deletes {
		r.Changes = append(r.Changes, Change{Key: k, Op: Deleted})
	}
	slices.SortFunc(r.Changes, func(a, b Change) int { return CompareKeys(a.Key, b.Key) })
	r.Total = len(r.Changes)
	return r
}

// MarshalRevision encodes a revision record for a backend to keep.
func MarshalRevision(r Revision) ([]byte, error) { return json.Marshal(r) }

// UnmarshalRevision decodes what MarshalRevision encoded.
func UnmarshalRevision(b []byte) (Revision, error) {
	var r Revision
	if err := json.Unmarshal(b, &r); err != nil {
		return Revision{}, fmt.Errorf("damaged revision record: %w", err)
	}
	return r, nil
}

// CompareKeys orders keys by type, name and constraints.
func CompareKeys(a, b resource.Key) int {
	if a.Type != b.Type {
		return cmpString(a.Type, b.Type)
	}
	if a.Name != b.Name {
		return cmpString(a.Name, b.Name)
	}
	return cmpString(a.Constraints, b.Constraints)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Filter selects variants by type and name; an empty field selects all.
type Filter struct {
	Type string // type URL
	Name string
}

// Match reports whether f selects key k.
func (f Filter) Match(k resource.Key) bool {
	return (f.Type == "" || f.Type == k.Type) && (f.Name == "" || f.Name == k.Name)
}

// Select returns r with only the changes f selects, and whether any is
// left.
func (f Filter) Select(r Revision) (Revision, bool) {
	if f == (Filter{}) {
		return r, true
	}
	var cs []Change
	for _, c := range r.Changes {
		if f.Match(c.Key) {
			cs = append(cs, c)
		}
	}
	r.Changes = cs
	return r, len(cs) > 0
}

// HistoryQuery selects revision records.
type HistoryQuery struct {
	Filter
	// Limit bounds the number of records (all when zero or negative).
	Limit int
	// Before, when positive, lists only revisions older than it: the
	// next page after a list whose last record was Before.
	Before int64
}

// Wants reports whether q selects revision rev, given that n records
// are already listed.
func (q HistoryQuery) Wants(rev int64, n int) bool {
	return (q.Before <= 0 || rev < q.Before) && (q.Limit <= 0 || n < q.Limit)
}

// Full reports whether n records fill q's limit.
func (q HistoryQuery) Full(n int) bool { return q.Limit > 0 && n >= q.Limit }

// RevisionList is the answer to a HistoryQuery.
type RevisionList struct {
	// Rev is the store's current revision.
	Rev int64 `json:"rev"`
	// Oldest is the oldest revision whose state the store can still give
	// (StateAt, rollback); older ones are compacted.
	Oldest int64 `json:"oldest"`
	// Revisions are the records selected, newest first.
	Revisions []Revision `json:"revisions"`
}

// ErrCompacted is the error of StateAt for a revision older than the
// history kept.
var ErrCompacted = errors.New("revision compacted (older than the history kept; see serve --history)")

// ErrNoRevision is the error of StateAt for a revision the store has not
// reached.
var ErrNoRevision = errors.New("no such revision")

// CheckStateAt returns the error of StateAt(rev) for a store at revision
// cur whose oldest restorable revision is oldest, or nil.
func CheckStateAt(rev, cur, oldest int64) error {
	switch {
	case rev < 0 || rev > cur:
		return fmt.Errorf("%w: %d (the store is at revision %d)", ErrNoRevision, rev, cur)
	case rev < oldest:
		return fmt.Errorf("%w: %d (the oldest kept is %d)", ErrCompacted, rev, oldest)
	}
	return nil
}

// Rewinder turns the state at one revision into the state at an earlier
// one by undoing revisions, newest first.
type Rewinder struct {
	f     Filter
	state map[resource.Key]*resource.Variant
}

// NewRewinder starts from the variants now (those f does not select are
// left out).
func NewRewinder(now []*resource.Variant, f Filter) *Rewinder {
	w := &Rewinder{f: f, state: make(map[resource.Key]*resource.Variant, len(now))}
	for _, v := range now {
		if k := v.Key(); f.Match(k) {
			w.state[k] = v
		}
	}
	return w
}

// Undo undoes revision r, which must be the oldest not yet undone; prev
// returns the variant a change of r replaced or removed.
func (w *Rewinder) Undo(r Revision, prev func(resource.Key) (*resource.Variant, error)) error {
	for _, c := range r.Changes {
		if !w.f.Match(c.Key) {
			continue
		}
		if c.Op == Created {
			delete(w.state, c.Key)
			continue
		}
		p, err := prev(c.Key)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("the history of revision %d lacks what %s was before it", r.Rev, c.Key)
		}
		w.state[c.Key] = p
	}
	return nil
}

// State returns the variants, sorted by key.
func (w *Rewinder) State() []*resource.Variant {
	out := make([]*resource.Variant, 0, len(w.state))
	for _, v := range w.state {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *resource.Variant) int { return CompareKeys(a.Key(), b.Key()) })
	return out
}

// Backuper is a store that can write a consistent copy of itself, as a
// bolt store file, while it serves (xdsd backup): bolt writes its own
// file. Other stores are exported (bolt.Export).
type Backuper interface {
	// Backup writes the copy to w and returns the revision it holds.
	Backup(ctx context.Context, w io.Writer) (rev int64, err error)
}

// StateBatch computes the batch that makes a store holding the variants
// now hold the variants old instead (each a StateAt result, or a part of
// one): every resource whose variants differ is put back with its old
// variants — a whole variant set, so a TP2 set comes back as one — and
// every resource old lacks is deleted. Unchanged resources make no change
// (MakePlan keeps equal content). It is a rollback's batch, and a
// restore's.
func StateBatch(old, now []*resource.Variant) Batch {
	type group struct{ typ, name string }
	oldBy := map[group][]*resource.Variant{}
	var order []group
	for _, v := range old {
		g := group{v.Type.URL, v.Name}
		if _, ok := oldBy[g]; !ok {
			order = append(order, g)
		}
		oldBy[g] = append(oldBy[g], v)
	}
	var b Batch
	for _, g := range order {
		b.Puts = append(b.Puts, oldBy[g]...)
	}
	gone := map[group]bool{}
	for _, v := range now {
		g := group{v.Type.URL, v.Name}
		if _, ok := oldBy[g]; !ok && !gone[g] {
			gone[g] = true
			b.Deletes = append(b.Deletes, Delete{Type: g.typ, Name: g.name, All: true})
		}
	}
	return b
}
