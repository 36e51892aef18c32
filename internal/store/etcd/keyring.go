package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/internal/store"
)

// Key implements store.Keyring: the key is at PREFIX/k/NAME, created
// with a transaction that puts it only if it does not exist, so that of
// replicas racing to create it the first wins and all read its value.
func (s *Store) Key(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	k := s.key("k/", name)
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	tr, err := s.c.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(fresh))).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		return nil, unreachable(err)
	}
	if tr.Succeeded {
		return append([]byte(nil), fresh...), nil
	}
	kvs := tr.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, fmt.Errorf("etcd key %s exists and has no value", k)
	}
	return kvs[0].Value, nil
}
