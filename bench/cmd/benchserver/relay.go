package main

import (
	"context"
	"encoding/json"
	"log/slog"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/relay"
)

// relayImpl is the xdsd relay in front of an upstream (an xdsd
// benchserver, which takes the setup and changes).
type relayImpl struct{ r *relay.Relay }

func newRelay(upstream string, log *slog.Logger) (impl, func(*grpc.Server), []grpc.ServerOption, error) {
	js, err := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":    upstream,
			"channel_creds": []any{map[string]any{"type": "insecure"}},
		}},
		"node": map[string]any{"id": "benchserver-relay"},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := client.ParseBootstrap(js)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := relay.New(b, relay.Options{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	return relayImpl{r}, r.Register, protocol.ServerOptions(), nil
}

func (relayImpl) setup(context.Context, control.Setup, [][]*clusterv3.Cluster) error {
	return errUnsupported
}

func (relayImpl) change(context.Context, int, [][]*clusterv3.Cluster) error {
	return errUnsupported
}

func (x relayImpl) close() { x.r.Close() }
