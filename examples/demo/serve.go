package main

import (
	"context"
	"fmt"
	"log/slog"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

// serve loads the example, points its endpoints at the backends (the
// example names ports 50061–50064; the demo's backends run on free ports),
// and serves it over xDS on a free loopback port.
func serve(ctx context.Context, dir string, backends map[string]int, log *slog.Logger) (string, func(), error) {
	docs, err := resource.Load(dir)
	if err != nil {
		return "", nil, err
	}
	var b store.Batch
	for _, d := range docs {
		v := d.Variant
		if cla, ok := d.Message.(*endpointv3.ClusterLoadAssignment); ok {
			port, ok := backends[cla.GetClusterName()]
			if !ok {
				return "", nil, fmt.Errorf("%s: no backend for cluster %s", d.Location, cla.GetClusterName())
			}
			for _, le := range cla.GetEndpoints() {
				for _, ep := range le.GetLbEndpoints() {
					ep.GetEndpoint().GetAddress().GetSocketAddress().PortSpecifier =
						&corev3.SocketAddress_PortValue{PortValue: uint32(port)}
				}
			}
			body, err := resource.Marshal(cla)
			if err != nil {
				return "", nil, err
			}
			v = resource.NewVariant(v.Type, v.Name, v.Constraints, "", v.PayloadURL, body)
		}
		b.Puts = append(b.Puts, v)
	}
	st := mem.New()
	if _, err := st.Apply(ctx, b); err != nil {
		st.Close()
		return "", nil, err
	}
	srv := origin.New(st, origin.Options{Logger: log})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(runCtx) }()
	if err := srv.WaitRev(ctx, st.Rev()); err != nil {
		cancel()
		return "", nil, err
	}
	lis, _, err := freePort()
	if err != nil {
		cancel()
		return "", nil, err
	}
	g := grpc.NewServer(protocol.ServerCodec())
	srv.Register(g)
	go g.Serve(lis)
	return lis.Addr().String(), func() {
		srv.Close()
		g.Stop()
		cancel()
		<-done
		st.Close()
	}, nil
}
