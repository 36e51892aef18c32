package main

import (
	"context"
	"fmt"
	"log/slog"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/files"
	"github.com/xdsd/xdsd/server"
)

// serve loads the example, points its endpoints at the backends (the
// example names ports 50061–50064; the demo's backends run on free ports),
// and serves it over xDS on a free loopback port.
func serve(ctx context.Context, dir string, backends map[string]int, log *slog.Logger) (string, func(), error) {
	docs, err := files.Load(dir)
	if err != nil {
		return "", nil, err
	}
	var b server.Batch
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
	srv, err := server.New(ctx, server.Options{Logger: log})
	if err != nil {
		return "", nil, err
	}
	if _, err := srv.Apply(ctx, b); err != nil {
		srv.Close()
		return "", nil, err
	}
	lis, _, err := freePort()
	if err != nil {
		srv.Close()
		return "", nil, err
	}
	go srv.Serve(lis)
	return lis.Addr().String(), func() { srv.Close() }, nil
}
