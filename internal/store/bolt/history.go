package bolt

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// History: the undo records and revision record each revision writes, the
// list of revisions (Revisions) and the state at one of them (StateAt).

// putUndo writes the undo records of revision rev, before it changes
// anything: for each variant the plan replaces or removes, its record as
// stored. A record whose body is kept apart refers to it, and the body
// stays until the undo record is trimmed with the history (Apply): history costs no
// copy of a payload, and a batch that changes 100,000 resources holds
// none of their old payloads.
func putUndo(tx *bbolt.Tx, rev int64, p store.Plan) error {
	res, undo := tx.Bucket(bucketRes), tx.Bucket(bucketUndo)
	// Keys of a new revision come after every other: pages filled up, as
	// they will never take a key in between (bbolt's default leaves them
	// half empty, and a commit holds every page it writes).
	undo.FillPercent = 1
	// In key order: bbolt inserts into a node by moving what follows, and
	// 100,000 keys in a map's order took 6 of the 9 seconds the whole
	// apply took.
	// (Sorted as their keys are, without holding the keys: a key's parts
	// hold no NUL; see sortPuts.)
	keys := make([]resource.Key, 0, len(p.Prev))
	for k := range p.Prev {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, store.CompareKeys)
	for _, key := range keys {
		k := append(u64(uint64(rev)), resKey(key)...)
		rec := res.Get(k[8:])
		if rec == nil {
			return fmt.Errorf("the record of %q, which revision %d replaces, is missing", k[8:], rev)
		}
		// A copy: the record's bytes are the file's, and the transaction
		// writes over its key next.
		if err := undo.Put(k, bytes.Clone(rec)); err != nil {
			return err
		}
	}
	return nil
}

// putHistory writes the record of revision rev (its undo records are
// putUndo's).
func putHistory(tx *bbolt.Tx, rev int64, a store.Audit, p store.Plan) error {
	rec, err := encodeRevision(time.Now(), a, p)
	if err != nil {
		return err
	}
	revs := tx.Bucket(bucketRevs)
	revs.FillPercent = 1 // (appended to only, as the undo records)
	return revs.Put(u64(uint64(rev)), sealRevision(rev, rec))
}

// oldest is the oldest revision whose state the file can give.
func oldest(meta *bbolt.Bucket) int64 {
	return max(int64(getU64(meta.Get(keyCompact))), int64(getU64(meta.Get(keyHistFrom))))
}

// Revisions implements store.Store.
func (s *Store) Revisions(ctx context.Context, q store.HistoryQuery) (store.RevisionList, error) {
	if err := s.open(); err != nil {
		return store.RevisionList{}, err
	}
	var out store.RevisionList
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			out = store.RevisionList{Rev: int64(getU64(meta.Get(keyRev))), Oldest: oldest(meta)}
			c := tx.Bucket(bucketRevs).Cursor()
			var k, v []byte
			switch {
			case q.Before <= 0:
				k, v = c.Last()
			default:
				if k, _ = c.Seek(u64(uint64(q.Before))); k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			}
			var name []byte
			if q.Name != "" {
				name = []byte(q.Name)
			}
			for ; k != nil && !q.Full(len(out.Revisions)); k, v = c.Prev() {
				if err := ctx.Err(); err != nil {
					return err
				}
				if name != nil && !bytes.Contains(v, name) {
					// A record keeps each name whole (both formats): one
					// without it has no change for the filter, and is not
					// decoded. The history of one resource among a million
					// decoded every batch's keys (Open checks every record).
					continue
				}
				r, err := openRevision(k, v)
				if err != nil {
					return err
				}
				if !q.Wants(r.Rev, len(out.Revisions)) {
					continue
				}
				if r, ok := q.Filter.Select(r); ok {
					out.Revisions = append(out.Revisions, r)
				}
			}
			return nil
		})
	})
	return out, err
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	var out []*resource.Variant
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta, res, bodies := tx.Bucket(bucketMeta), tx.Bucket(bucketRes), tx.Bucket(bucketBody)
			cur := int64(getU64(meta.Get(keyRev)))
			if err := store.CheckStateAt(rev, cur, oldest(meta)); err != nil {
				return err
			}
			var prefix []byte
			switch {
			case f.Type != "" && f.Name != "":
				prefix = resKey(resource.Key{Type: f.Type, Name: f.Name})
			case f.Type != "":
				prefix = append([]byte(f.Type), 0)
			}
			var now []*resource.Variant
			c := res.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				key, err := splitKey(k)
				if err != nil {
					return err
				}
				if !f.Match(key) {
					continue
				}
				vr, err := getVariant(bodies, key, k, v)
				if err != nil {
					return err
				}
				now = append(now, vr)
			}
			w := store.NewRewinder(now, f)
			undo := tx.Bucket(bucketUndo)
			rc := tx.Bucket(bucketRevs).Cursor()
			for k, v := rc.Last(); k != nil && int64(getU64(k)) > rev; k, v = rc.Prev() {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := openRevision(k, v)
				if err != nil {
					return err
				}
				err = w.Undo(r, func(key resource.Key) (*resource.Variant, error) {
					k := resKey(key)
					b := undo.Get(append(u64(uint64(r.Rev)), k...))
					if b == nil {
						return nil, nil
					}
					return getVariant(bodies, key, k, b)
				})
				if err != nil {
					return err
				}
			}
			out = w.State()
			return nil
		})
	})
	return out, err
}

// trimHistory removes the log entries, revision records and undo records
// (with the bodies only they kept) of revisions up to drop, the history
// older than the window (Options.History). Apply calls it on each
// commit, so the trimming is a little at a time and no apply pays for a
// long backlog.
func trimHistory(tx *bbolt.Tx, drop int64) error {
	bodies := tx.Bucket(bucketBody)
	for _, bk := range [][]byte{bucketLog, bucketRevs, bucketUndo} {
		c := tx.Bucket(bk).Cursor()
		for k, v := c.First(); len(k) >= 8 && int64(getU64(k[:8])) <= drop; k, v = c.First() {
			if bytes.Equal(bk, bucketUndo) {
				// The body the undo record kept goes with it.
				if ref := store.BodyRef(v); ref != nil {
					if err := bodies.Delete(bodyKey(k[8:], ref)); err != nil {
						return err
					}
				}
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return tx.Bucket(bucketMeta).Put(keyCompact, u64(uint64(drop)))
}
