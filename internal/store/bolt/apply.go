package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Apply: a batch planned, written and committed as one revision, with its
// log entry, undo records and revision record.

// errNoChange rolls back the transaction of a batch that changes nothing,
// so that it costs no write to the file.
var errNoChange = errors.New("no change")

// Apply implements store.Store.
//
// A batch whose payloads are over Options.PrewriteBytes is written in steps,
// so that bbolt, which holds every page a transaction dirties until its
// commit, never holds a copy of the whole batch: its bodies first, in
// transactions of about PrewriteBytes each, under keys that no record refers
// to yet (invisible: each is its key and the new revision); then one
// transaction writes the records that refer to them, the revision and its
// history, which is what makes the batch visible, all of it or none. A
// batch that fails after its bodies were prewritten has them removed; a crash
// leaves them under the revision named by keyPrewritten, and Open removes
// them.
func (s *Store) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	return s.apply(ctx, b, nil)
}

// apply is Apply of b, whose puts pl prewritten in part while it was read
// (prewrite.go), or none (pl nil).
func (s *Store) apply(ctx context.Context, b store.Batch, pl *prewrite) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Result{}, store.ErrClosed
	}
	if err := store.CheckIfRev(b, s.rev); err != nil {
		return store.Result{}, err
	}
	rev := s.rev + 1
	var (
		p                   store.Plan
		planned, prewritten bool
		ahead               *prewrittenAhead // what pl prewritten, while the batch was read
	)
	if pl != nil {
		ahead = &prewrittenAhead{at: pl.at, refs: pl.refs}
	}
	if pl != nil || s.prewriteBytes > 0 && batchBytes(b) > s.prewriteBytes {
		var err error
		if p, prewritten, err = s.planPrewritten(ctx, &b, rev, ahead); err != nil {
			return store.Result{}, err
		}
		planned = true
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		res, bodies := tx.Bucket(bucketRes), tx.Bucket(bucketBody)
		if !planned {
			var err error
			if p, err = store.MakePlan(txReader{res, bodies}, b, rev); err != nil {
				return err
			}
		}
		metaChanged, err := putUserMeta(tx.Bucket(bucketUser), p.Meta)
		if err != nil {
			return err
		}
		if p.Empty() {
			if ahead != nil {
				// Prewritten for resources new then, and put since as the
				// batch has them.
				return ahead.commit(tx)
			}
			if !metaChanged {
				return errNoChange
			}
			return nil
		}
		keys := make([]resource.Key, 0, len(p.Deletes)+len(p.Puts))
		if err := putUndo(tx, rev, p); err != nil {
			return err
		}
		for _, k := range p.Deletes {
			if err := res.Delete(resKey(k)); err != nil { // (its body stays with its undo record)
				return err
			}
			keys = append(keys, k)
		}
		// In key order, into pages filled up: a large batch then appends
		// to the tree instead of splitting pages at random, and the pages
		// it dirties (which bbolt holds until the commit) are half as many.
		if !planned {
			sortPuts(p.Puts)
		}
		puts := p.Puts
		if len(puts) > bulkPuts {
			res.FillPercent, bodies.FillPercent = 1, 1
		}
		ref := u64(uint64(rev))
		for _, v := range puts {
			k := v.Key()
			if at, ok := ahead.take(v); ok {
				if err := putVariant(res, bodies, resKey(k), v, at, true); err != nil {
					return err
				}
			} else if err := putVariant(res, bodies, resKey(k), v, ref, prewritten); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		if ahead != nil {
			if err := ahead.commit(tx); err != nil {
				return err
			}
		}
		lg := tx.Bucket(bucketLog)
		lg.FillPercent = 1 // (appended to only, as the undo records)
		if err := lg.Put(u64(uint64(rev)), encodeKeys(keys)); err != nil {
			return err
		}
		if err := putHistory(tx, rev, b.Audit, p); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if drop := rev - int64(s.history); drop > 0 {
			if err := trimHistory(tx, drop); err != nil {
				return err
			}
		}
		if prewritten {
			if err := meta.Delete(keyPrewritten); err != nil {
				return err
			}
		}
		return meta.Put(keyRev, u64(uint64(rev)))
	})
	if err != nil && !errors.Is(err, errNoChange) {
		if prewritten {
			err = s.unstage(rev, err)
		}
		return store.Result{}, err
	}
	if p.Empty() {
		return store.Result{Rev: s.rev}, nil
	}
	s.rev = rev
	s.last = store.ChangeSet{Rev: rev, Puts: p.Puts, Deletes: p.Deletes}
	s.notify.Wake()
	return p.Result(rev), nil
}

// batchBytes is the size of a batch's payloads.
func batchBytes(b store.Batch) int {
	n := 0
	for _, v := range b.Puts {
		n += v.Size()
	}
	return n
}

// sortPuts orders variants as their keys (resKey) sort, without
// holding the keys: for 100,000 resources those were 9 MB more at the
// batch's peak. A key's parts hold no NUL, so comparing them one after
// the other orders them as the bytes of the keys would.
func sortPuts(vs []*resource.Variant) { slices.SortFunc(vs, comparePuts) }

func comparePuts(a, b *resource.Variant) int { return store.CompareKeys(a.Key(), b.Key()) }

// bulkPuts is the batch size past which pages are filled up.
const bulkPuts = 1000

// putUserMeta writes a plan's metadata and reports whether any of it
// differed from what was stored.
func putUserMeta(b *bbolt.Bucket, m map[string][]byte) (bool, error) {
	changed := false
	for k, v := range m {
		old := b.Get([]byte(k))
		if v == nil && old == nil || v != nil && old != nil && bytes.Equal(v, old) {
			continue
		}
		changed = true
		var err error
		if v == nil {
			err = b.Delete([]byte(k))
		} else {
			err = b.Put([]byte(k), v)
		}
		if err != nil {
			return false, fmt.Errorf("metadata key %.64q: %w", k, err)
		}
	}
	return changed, nil
}

// planPrewritten plans a batch whose bodies are written ahead of its commit
// (over Options.PrewriteBytes, or prewritten in part while it was read: ahead),
// prewrite for revision rev those not prewritten yet; prewritten reports whether
// any were. b's puts are sorted, and dropped once planned.
func (s *Store) planPrewritten(ctx context.Context, b *store.Batch, rev int64, ahead *prewrittenAhead) (p store.Plan, prewritten bool, err error) {
	// The bodies of resources new to the store are prewritten while the
	// plan is made, in a read transaction that bbolt runs beside the
	// writer's (the initial map is large enough that the writer never
	// waits to remap); those of changed ones once it is made. For a
	// batch of new resources the plan then costs no time. The batch is
	// planned in key order, so that the plan's puts are in key order
	// too, as prewrite and the commit want them. A batch prewritten while it
	// was read has the bodies of its new resources prewritten already, but
	// for those new since.
	b.Puts = slices.Clone(b.Puts)
	sortPuts(b.Puts)
	var news []*resource.Variant
	done := make(chan error, 1)
	go func(sorted []*resource.Variant) {
		var err error
		if news, err = s.newPuts(ahead.without(sorted)); err == nil {
			err = s.prewrite(ctx, rev, news)
		}
		done <- err
	}(b.Puts)
	err = s.db.View(func(tx *bbolt.Tx) error {
		var err error
		p, err = store.MakePlan(txReader{tx.Bucket(bucketRes), tx.Bucket(bucketBody)}, *b, rev)
		return err
	})
	if aerr := <-done; err != nil || aerr != nil {
		return store.Plan{}, false, s.unstage(rev, errors.Join(err, aerr))
	}
	prewritten = len(news) > 0
	if !slices.IsSortedFunc(p.Puts, comparePuts) { // (MakePlan keeps a batch's order)
		sortPuts(p.Puts)
	}
	// The plan holds new variants (with their versions) sharing the
	// batch's payloads: without this, the batch's own 100,000 variants
	// stayed reachable until the commit.
	b.Puts = nil
	if len(news) == len(p.Puts) {
		// Every put is new, and prewritten (news holds keys of puts).
	} else if rest := notIn(ahead.without(p.Puts), news); len(rest) > 0 {
		if err := s.prewrite(ctx, rev, rest); err != nil {
			return store.Plan{}, false, s.unstage(rev, err)
		}
		prewritten = true
	}
	return p, prewritten, nil
}
