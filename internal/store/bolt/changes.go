package bolt

import (
	"context"

	bbolt "go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Changes: what changed since a revision, from the log, for watchers
// resuming (or the whole state, when the log no longer reaches back).

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, since int64) (store.ChangeSet, error) {
	s.mu.Lock()
	closed, last, loaded := s.closed, s.last, s.loaded
	if since == store.FromStart {
		s.loaded = nil // taken by the first load, whether it fits or not
	}
	s.mu.Unlock()
	if closed {
		return store.ChangeSet{}, store.ErrClosed
	}
	if last.Rev > 0 && since == last.Rev-1 {
		// A watcher one revision behind is given the last batch's
		// variants themselves: a large batch is then neither read back
		// from the file nor held twice.
		return last, nil
	}
	var cs store.ChangeSet
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta, res, lg, bodies := tx.Bucket(bucketMeta), tx.Bucket(bucketRes), tx.Bucket(bucketLog), tx.Bucket(bucketBody)
			rev := int64(getU64(meta.Get(keyRev)))
			compacted := int64(getU64(meta.Get(keyCompact)))
			if since < 0 || since < compacted || since > rev {
				if since == store.FromStart && loaded != nil && loaded.Rev == rev {
					// What Open decoded and checked, at this revision.
					cs = *loaded
					return nil
				}
				cs = store.ChangeSet{Rev: rev, Reset: true}
				return res.ForEach(func(k, v []byte) error {
					key, err := splitKey(k)
					if err != nil {
						return err
					}
					vr, err := getVariant(bodies, key, k, v)
					if err != nil {
						return err
					}
					cs.Puts = append(cs.Puts, vr)
					return nil
				})
			}
			var keys []resource.Key
			c := lg.Cursor()
			for k, v := c.Seek(u64(uint64(since + 1))); k != nil; k, v = c.Next() {
				ks, err := decodeKeys(v)
				if err != nil {
					return err
				}
				keys = append(keys, ks...)
			}
			var err error
			cs, err = store.Coalesce(rev, keys, func(k resource.Key) (*resource.Variant, error) {
				rk := resKey(k)
				v := res.Get(rk)
				if v == nil {
					return nil, nil
				}
				return getVariant(bodies, k, rk, v)
			})
			return err
		})
	})
	return cs, err
}
