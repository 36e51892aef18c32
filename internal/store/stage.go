package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/xdsd/xdsd/resource"
)

// Staged revisions. A staged revision is an ordinary
// committed revision whose record's Audit carries a Stage in state
// StateStaged: the server serves what it changed only to a canary set of
// streams, and the variants it replaced to every other. It is closed by
// a new revision whose Stage is StatePromoted (the same content, stamped
// anew for everyone: Batch.Touch) or StateAborted (the variants before
// it put back, as a rollback does), naming it in Of. The mark lives in
// the revision's record, so every backend keeps it as durably as the
// revision itself, a restart or another replica reads it back, and it
// is bound to the revision: a revision is staged exactly when it is the
// store's latest and its record says so (nothing else may commit on top
// of a staged revision but its promote or abort, which the admin API
// enforces).

// StageMetaKey is the metadata key (Batch.Meta) that every batch which
// stages, promotes or aborts a revision sets to the revision it makes
// (each applies with IfRev, so it knows it). A reader tells from it,
// without reading a record, that no revision it has not seen is staged:
// the record of a revision of 100,000 changes is megabytes of JSON,
// read once per revision otherwise.
const StageMetaKey = "xdsd/stage"

// StageMark returns the revision StageMetaKey holds (0 for none).
func StageMark(ctx context.Context, s Store) (int64, error) {
	b, err := s.Meta(ctx, StageMetaKey)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("damaged metadata %q: %q is not a revision", StageMetaKey, b)
	}
	return n, nil
}

// MarkStage sets b's StageMetaKey to the revision b makes (IfRev+1).
func MarkStage(b *Batch) {
	if b.Meta == nil {
		b.Meta = map[string][]byte{}
	}
	b.Meta[StageMetaKey] = []byte(strconv.FormatInt(b.IfRev+1, 10))
}

// MaybeStaged reports whether revision rev may be staged, from the mark
// alone: only a revision that set the mark can be, and a mark past rev
// (a reader behind the store) cannot tell.
func MaybeStaged(ctx context.Context, s Store, rev int64) (bool, error) {
	m, err := StageMark(ctx, s)
	return m != 0 && m >= rev, err
}

// The states of a Stage.
const (
	StateStaged   = "staged"
	StatePromoted = "promoted"
	StateAborted  = "aborted"
)

// Stage is the canary mark of a revision's record.
type Stage struct {
	// State is StateStaged on the staged revision, StatePromoted or
	// StateAborted on the revision that closed it.
	State string `json:"state"`
	// Canary is the canary SPEC (internal/canary): who is served the
	// staged revision.
	Canary string `json:"canary,omitempty"`
	// Bake, when positive, makes the server promote the revision by
	// itself once Bake has passed since the revision's time, if no canary
	// stream NACKed it and one ACKed it.
	Bake Duration `json:"bake,omitempty"`
	// AbortOnNack makes the server abort the revision by itself when a
	// canary stream NACKs it (apply --rollback-on-nack).
	AbortOnNack bool `json:"abort_on_nack,omitempty"`
	// Of is the staged revision a promote or abort closes.
	Of int64 `json:"of,omitempty"`
	// Reason says why a promote or abort happened ("bake of 5m passed",
	// a NACK and its client), when the server made it by itself.
	Reason string `json:"reason,omitempty"`
}

// Duration is a time.Duration kept as its text ("5m0s") in records.
type Duration time.Duration

// MarshalText writes the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("damaged stage duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}

// Staged returns the record of the store's staged revision, and false
// when no revision is staged: the latest revision's record, when its
// Stage says staged.
func Staged(ctx context.Context, s Store) (Revision, bool, error) {
	rec, staged, _, err := StagedAt(ctx, s, s.Rev())
	return rec, staged, err
}

// StagedAt is Staged for a writer that found the store at revision cur:
// it also returns the revision the answer holds at, which a write made
// only while nothing is staged applies at (Batch.IfRev): cur when the
// mark rules a stage out, else the latest record's revision (another
// replica may have written since cur).
func StagedAt(ctx context.Context, s Store, cur int64) (rec Revision, staged bool, at int64, err error) {
	if maybe, err := MaybeStaged(ctx, s, cur); err != nil || !maybe {
		return Revision{}, false, cur, err
	}
	return StagedLatest(ctx, s)
}

// StagedLatest is StagedAt read from the store's latest record whatever
// the mark says: for a writer whose write found that the store had moved
// on past the revision it read (Batch.IfRev's ErrConflict), when this
// replica's own revision may still be behind.
func StagedLatest(ctx context.Context, s Store) (rec Revision, staged bool, at int64, err error) {
	l, err := s.Revisions(ctx, HistoryQuery{Limit: 1})
	if err != nil {
		return Revision{}, false, 0, err
	}
	if rec, staged, err = StagedIn(l); err != nil {
		return Revision{}, false, 0, err
	}
	return rec, staged, l.Rev, nil
}

// StagedIn is Staged of a list whose first record is the store's latest
// revision (a HistoryQuery without filter or Before).
func StagedIn(l RevisionList) (Revision, bool, error) {
	if len(l.Revisions) == 0 || l.Revisions[0].Rev != l.Rev {
		return Revision{}, false, nil
	}
	r := l.Revisions[0]
	if st := r.Audit.Stage; st != nil && st.State == StateStaged {
		return r, true, nil
	}
	return Revision{}, false, nil
}

// RecordAt returns the record of revision rev, and false when the store
// keeps none for it (compacted, or never made).
func RecordAt(ctx context.Context, s Store, rev int64) (Revision, bool, error) {
	l, err := s.Revisions(ctx, HistoryQuery{Before: rev + 1, Limit: 1})
	if err != nil {
		return Revision{}, false, err
	}
	if len(l.Revisions) == 0 || l.Revisions[0].Rev != rev {
		return Revision{}, false, nil
	}
	return l.Revisions[0], true, nil
}

// Resources returns the resources (type and name, Constraints empty) the
// changes of a record touch, each once, in order.
func (r Revision) Resources() []resource.Key {
	var out []resource.Key
	seen := map[resource.Key]bool{}
	for _, c := range r.Changes {
		k := resource.Key{Type: c.Key.Type, Name: c.Key.Name}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// stateOf returns the variants of the resources keys at revision rev, by
// resource (each sorted by constraint key), reading one resource at a
// time: a canary is a change to a few resources, and the whole state can
// be large.
func stateOf(ctx context.Context, s Store, rev int64, keys []resource.Key) (map[resource.Key][]*resource.Variant, error) {
	out := make(map[resource.Key][]*resource.Variant, len(keys))
	for _, k := range keys {
		vs, err := s.StateAt(ctx, rev, Filter{Type: k.Type, Name: k.Name})
		if err != nil {
			return nil, fmt.Errorf("the variants of %s before staged revision %d: %w", k, rev+1, err)
		}
		out[k] = vs
	}
	return out, nil
}

// PrevOf returns, for each resource the staged revision rec changed, its
// variants before it: what streams outside the canary are served.
func PrevOf(ctx context.Context, s Store, rec Revision) (map[resource.Key][]*resource.Variant, error) {
	return stateOf(ctx, s, rec.Rev-1, rec.Resources())
}

// PromoteBatch is the batch that promotes the staged revision rec: what
// it changed, put again with the same content and touched (Batch.Touch),
// so that it becomes a revision of its own served to every stream. It
// applies only while rec is still the store's latest revision.
func PromoteBatch(ctx context.Context, s Store, rec Revision, a Audit) (Batch, error) {
	now, err := stateOf(ctx, s, rec.Rev, rec.Resources())
	if err != nil {
		return Batch{}, err
	}
	b := Batch{IfRev: rec.Rev, Audit: a, Touch: map[resource.Key]bool{}}
	for _, k := range rec.Resources() {
		b.Puts = append(b.Puts, now[k]...)
	}
	for _, c := range rec.Changes {
		if c.Op != Deleted {
			b.Touch[c.Key] = true
		}
	}
	if len(b.Touch) == 0 {
		// Only variants went away: every variant of the resources left
		// is stamped anew, so that the promote is still a revision.
		for _, v := range b.Puts {
			b.Touch[v.Key()] = true
		}
	}
	if len(b.Puts) == 0 {
		return Batch{}, fmt.Errorf("staged revision %d only deleted resources: there is nothing to promote; abort it, or delete them without --canary", rec.Rev)
	}
	MarkStage(&b)
	return b, nil
}

// AbortBatch is the batch that aborts the staged revision rec: the
// variants it replaced put back and those it created deleted, as a
// rollback to the revision before it would, for what it changed only. It
// applies only while rec is still the store's latest revision.
func AbortBatch(ctx context.Context, s Store, rec Revision, a Audit) (Batch, error) {
	keys := rec.Resources()
	old, err := stateOf(ctx, s, rec.Rev-1, keys)
	if err != nil {
		return Batch{}, err
	}
	now, err := stateOf(ctx, s, rec.Rev, keys)
	if err != nil {
		return Batch{}, err
	}
	var ov, nv []*resource.Variant
	for _, k := range keys {
		ov = append(ov, old[k]...)
		nv = append(nv, now[k]...)
	}
	b := StateBatch(ov, nv)
	b.IfRev, b.Audit = rec.Rev, a
	MarkStage(&b)
	return b, nil
}
