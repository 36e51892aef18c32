package server_test

import (
	"context"
	"log"
	"log/slog"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
)

// quiet discards the logs, so that the examples show only their output.
var quiet = slog.New(slog.DiscardHandler)

// ads is the config source that says "from the same ADS stream".
func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

// newClient is an xDS client of the server at addr, sending params as its
// TP2 dynamic parameters.
func newClient(addr string, params map[string]string) *client.Client {
	c, err := client.New(&client.Bootstrap{
		Servers:           []client.ServerConfig{{URI: addr, ChannelCreds: []client.ChannelCreds{{Type: "insecure"}}}},
		Node:              &corev3.Node{Id: "example"},
		DynamicParameters: params,
	}, client.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

// get waits for the first value of a resource.
func get[M proto.Message](c *client.Client, name string) M {
	got := make(chan M, 1)
	cancel, err := client.WatchTyped(context.Background(), c, name, func(e client.TypedEvent[M]) {
		if e.Kind == client.Updated {
			select {
			case got <- e.Resource:
			default:
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cancel()
	return <-got
}
