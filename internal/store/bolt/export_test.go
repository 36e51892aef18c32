package bolt

import (
	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/internal/store"
)

// SetPrewriteHook sets a function called after each transaction of bodies
// prewritten by a large Apply.
func SetPrewriteHook(f func(n int)) { prewriteHook = f }

// RewriteHistoryAsFormat2 rewrites, in tx, every log entry, revision
// record and undo record as xdsd wrote them up to format 2: each key
// whole (resKey), no table of types; each undo record with its body.
func RewriteHistoryAsFormat2(tx *bbolt.Tx) error {
	lg, revs, undo, bodies := tx.Bucket(bucketLog), tx.Bucket(bucketRevs), tx.Bucket(bucketUndo), tx.Bucket(bucketBody)
	var kvs [][2][]byte
	err := undo.ForEach(func(k, v []byte) error {
		key, err := splitKey(k[8:])
		if err != nil {
			return err
		}
		vr, err := getVariant(bodies, key, k[8:], v)
		if err != nil {
			return err
		}
		rec, err := encodeRecord(vr)
		kvs = append(kvs, [2][]byte{append([]byte(nil), k...), rec})
		return err
	})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := undo.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	kvs = nil
	err = lg.ForEach(func(k, v []byte) error {
		keys, err := decodeKeys(v)
		if err != nil {
			return err
		}
		var b []byte
		for _, key := range keys {
			b = protowire.AppendBytes(b, resKey(key))
		}
		kvs = append(kvs, [2][]byte{append([]byte(nil), k...), b})
		return nil
	})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := lg.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	kvs = nil
	err = revs.ForEach(func(k, v []byte) error {
		rec := v[:len(v)-4]
		h, _ := protowire.ConsumeBytes(rec[1:])
		r, err := decodeRevision(int64(getU64(k)), rec)
		if err != nil {
			return err
		}
		b := protowire.AppendBytes([]byte{revisionFormat1}, h)
		for _, c := range r.Changes {
			op := map[store.Op]byte{store.Created: opCreated, store.Updated: opUpdated, store.Deleted: opDeleted}[c.Op]
			b = protowire.AppendBytes(append(b, op), resKey(c.Key))
		}
		kvs = append(kvs, [2][]byte{append([]byte(nil), k...), sealRevision(int64(getU64(k)), b)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if err := revs.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}
