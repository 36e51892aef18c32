package etcd

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReplicaTTL is how long a replica that stopped renewing its lease (it
// died, or lost etcd) stays listed: the fleet view stops asking it then.
const ReplicaTTL = 10 * time.Second

// Register lists this process among the replicas sharing the prefix, as
// id with value (its admin API's URL), under a lease it renews until ctx
// ends or the store closes: a replica that dies leaves the list with its
// lease (docs/fleet.md).
func (s *Store) Register(ctx context.Context, id, value string) error {
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	l, err := s.c.Grant(rctx, int64(ReplicaTTL/time.Second))
	if err != nil {
		return unreachable(err)
	}
	if _, err := s.c.Put(rctx, s.key("x/", id), value, clientv3.WithLease(l.ID)); err != nil {
		return unreachable(err)
	}
	kctx, kcancel := context.WithCancel(ctx)
	ch, err := s.c.KeepAlive(kctx, l.ID)
	if err != nil {
		kcancel()
		return unreachable(err)
	}
	go func() {
		defer kcancel()
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return // ctx ended, or the client closed
				}
			case <-s.stopped():
				return
			}
		}
	}()
	return nil
}

// stopped is closed when the store closes.
func (s *Store) stopped() <-chan struct{} { return s.done }

// Replicas lists the live replicas: id → the value each registered.
func (s *Store) Replicas(ctx context.Context) (map[string]string, error) {
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	resp, err := s.c.Get(rctx, s.key("x/"), clientv3.WithPrefix())
	if err != nil {
		return nil, unreachable(err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), s.key("x/"))] = string(kv.Value)
	}
	return out, nil
}
