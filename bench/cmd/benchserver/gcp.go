package main

import (
	"context"
	"fmt"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/bench/control"
)

// The go-control-plane (v0.14.0) peers. Both are served by its
// pkg/server/v3 server, registered for ADS, which serves SotW and delta;
// its default logger is a no-op, and no callbacks are installed.
//
// In v0.14.0 a SotW CDS request that names resources is a named
// subscription: legacy wildcard applies only to a first request with no
// names (config.IsLegacyWildcardActive), and both caches answer named CDS
// requests with exactly the named clusters (full state of those, as SotW
// CDS requires). No option is needed for the load generator's named
// subscriptions.

// gcpServer starts a go-control-plane server of c; cancel ends its streams.
func gcpServer(c cachev3.Cache) (func(*grpc.Server), context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, c, nil)
	return func(g *grpc.Server) { discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, srv) }, cancel
}

// gcpCheck rejects the setups only xdsd does.
func gcpCheck(s control.Setup) error {
	if s.Glob || s.Variants > 1 {
		return fmt.Errorf("glob and variants: %w", errUnsupported)
	}
	return nil
}

// benchGroup is the one node group of the snapshot cache: the load
// generator's streams have node ids "loadgen-<i>", and hashing them all to
// one group lets one SetSnapshot per change serve every stream, the most
// favourable way to use the snapshot cache here.
const benchGroup = "bench"

type oneGroup struct{}

func (oneGroup) ID(*corev3.Node) string { return benchGroup }

// gcpSnapshot is go-control-plane's SnapshotCache: each change is a new
// snapshot of every cluster, with a new version, set for the one group.
type gcpSnapshot struct {
	cache    cachev3.SnapshotCache
	cancel   context.CancelFunc
	clusters []types.Resource // current, in cluster order
	version  int
}

func newGCPSnapshot() (impl, func(*grpc.Server)) {
	c := cachev3.NewSnapshotCache(false, oneGroup{}, nil)
	reg, cancel := gcpServer(c)
	return &gcpSnapshot{cache: c, cancel: cancel}, reg
}

func (g *gcpSnapshot) set(ctx context.Context, clusters []types.Resource) error {
	g.version++
	snap, err := cachev3.NewSnapshot(strconv.Itoa(g.version), map[resourcev3.Type][]types.Resource{resourcev3.ClusterType: clusters})
	if err != nil {
		return err
	}
	if err := g.cache.SetSnapshot(ctx, benchGroup, snap); err != nil {
		return err
	}
	g.clusters = clusters
	return nil
}

func (g *gcpSnapshot) setup(ctx context.Context, s control.Setup, cl [][]*clusterv3.Cluster) error {
	if err := gcpCheck(s); err != nil {
		return err
	}
	clusters := make([]types.Resource, len(cl))
	for i, vs := range cl {
		clusters[i] = vs[0]
	}
	return g.set(ctx, clusters)
}

func (g *gcpSnapshot) change(ctx context.Context, _ int, cl [][]*clusterv3.Cluster) error {
	clusters := make([]types.Resource, len(g.clusters))
	copy(clusters, g.clusters)
	for i, vs := range cl {
		clusters[i] = vs[0]
	}
	return g.set(ctx, clusters)
}

func (g *gcpSnapshot) close() { g.cancel() }

// gcpLinear is go-control-plane's LinearCache of clusters: a change is one
// UpdateResources call with the changed clusters.
type gcpLinear struct {
	cache  *cachev3.LinearCache
	cancel context.CancelFunc
	names  []string
}

func newGCPLinear() (impl, func(*grpc.Server)) {
	c := cachev3.NewLinearCache(resourcev3.ClusterType)
	reg, cancel := gcpServer(c)
	return &gcpLinear{cache: c, cancel: cancel}, reg
}

func (g *gcpLinear) setup(_ context.Context, s control.Setup, cl [][]*clusterv3.Cluster) error {
	if err := gcpCheck(s); err != nil {
		return err
	}
	up := make(map[string]types.Resource, len(cl))
	names := make([]string, len(cl))
	for i, vs := range cl {
		names[i] = vs[0].GetName()
		up[names[i]] = vs[0]
	}
	var del []string
	for _, n := range g.names {
		if _, ok := up[n]; !ok {
			del = append(del, n)
		}
	}
	if err := g.cache.UpdateResources(up, del); err != nil {
		return err
	}
	g.names = names
	return nil
}

func (g *gcpLinear) change(_ context.Context, _ int, cl [][]*clusterv3.Cluster) error {
	if len(cl) == 0 {
		return nil
	}
	up := make(map[string]types.Resource, len(cl))
	for _, vs := range cl {
		up[vs[0].GetName()] = vs[0]
	}
	return g.cache.UpdateResources(up, nil)
}

func (g *gcpLinear) close() { g.cancel() }
