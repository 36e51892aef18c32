package bolt

import (
	"bytes"
	"context"

	"go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
)

// keyPrefix marks the keys of store.Keyring in the meta bucket, apart
// from the store's own records there.
const keyPrefix = "key/"

// Key implements store.Keyring: the key is in the meta bucket, made in
// one transaction with the check that it is not there yet, so it is made
// once and kept (and copied by a backup, with the rest of the file).
func (s *Store) Key(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	var out []byte
	err := guard(func() error {
		return s.db.Update(func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			k := []byte(keyPrefix + name)
			if v := meta.Get(k); len(v) > 0 {
				out = bytes.Clone(v)
				return nil
			}
			out = bytes.Clone(fresh)
			return meta.Put(k, out)
		})
	})
	return out, err
}
