package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

// xdsdImpl is the xdsd server role over an in-memory store, a bolt file
// (--store bolt:PATH, the store `xdsd serve` uses by default), or an etcd
// store shared with other replicas (--store etcd://...).
type xdsdImpl struct {
	st    store.Store
	srv   *origin.Server
	names []string // the clusters of the last setup
}

func newXdsd(log *slog.Logger, storeURL string) (impl, func(*grpc.Server), []grpc.ServerOption, error) {
	var st store.Store = mem.New()
	if path, ok := strings.CutPrefix(storeURL, "bolt:"); ok {
		bs, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--store %s: %w", storeURL, err)
		}
		st = bs
	} else if storeURL != "" {
		o, err := etcd.ParseURL(storeURL)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--store: %w", err)
		}
		o.Logger = log
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		es, err := etcd.Open(ctx, o)
		cancel()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--store %s: %w", storeURL, err)
		}
		st = es
	}
	srv := origin.New(st, origin.Options{Logger: log})
	srv.Start()
	return &xdsdImpl{st: st, srv: srv}, srv.Register, protocol.ServerOptions(), nil
}

// variants makes the store variants of clusters: variant j of a cluster
// carries the constraint v=j when there are several.
func (x *xdsdImpl) variants(cl [][]*clusterv3.Cluster) ([]*resource.Variant, error) {
	t := resource.ForURL(resource.ClusterURL)
	out := make([]*resource.Variant, 0, len(cl)*max(len(cl[0]), 1))
	for _, vs := range cl {
		for j, c := range vs {
			body, err := resource.Marshal(c)
			if err != nil {
				return nil, err
			}
			var cons constraint.Constraints
			if len(vs) > 1 {
				cons = constraint.Value("v", fmt.Sprint(j))
			}
			out = append(out, resource.NewVariant(t, c.GetName(), cons, "", "", body))
		}
	}
	return out, nil
}

func (x *xdsdImpl) apply(ctx context.Context, b store.Batch) error {
	res, err := x.st.Apply(ctx, b)
	if err != nil {
		return err
	}
	return x.srv.WaitRev(ctx, res.Rev)
}

func (x *xdsdImpl) setup(ctx context.Context, s control.Setup, cl [][]*clusterv3.Cluster) error {
	puts, err := x.variants(cl)
	if err != nil {
		return err
	}
	b := store.Batch{Puts: puts}
	keep := make(map[string]bool, len(cl))
	names := make([]string, len(cl))
	for i, vs := range cl {
		names[i] = vs[0].GetName()
		keep[names[i]] = true
	}
	for _, n := range x.names {
		if !keep[n] {
			b.Deletes = append(b.Deletes, store.Delete{Type: resource.ClusterURL, Name: n, All: true})
		}
	}
	if err := x.apply(ctx, b); err != nil {
		return err
	}
	x.names = names
	return nil
}

func (x *xdsdImpl) change(ctx context.Context, _ int, cl [][]*clusterv3.Cluster) error {
	if len(cl) == 0 {
		return nil
	}
	puts, err := x.variants(cl)
	if err != nil {
		return err
	}
	return x.apply(ctx, store.Batch{Puts: puts})
}

func (x *xdsdImpl) close() {
	x.srv.Close()
	x.st.Close()
}
