package relay_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/relay"
	"github.com/xdsd/xdsd/server"
)

// A relay in front of a server: clients connect to the relay, which holds
// one upstream subscription per resource however many clients ask.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	// The upstream: an embedded server with one cluster.
	srv, err := server.New(ctx, server.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	var b server.Batch
	err = b.Put("backend", &clusterv3.Cluster{
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
		ConnectTimeout: durationpb.New(time.Second),
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := srv.Apply(ctx, b); err != nil {
		log.Fatal(err)
	}
	upLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(upLis)

	// The relay, on the program's own gRPC server.
	r, err := relay.New(bootstrap(upLis.Addr().String(), "relay"), relay.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	g := grpc.NewServer(server.GRPCServerOptions()...)
	r.Register(g)
	defer g.Stop()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go g.Serve(lis)

	// Two clients of the relay.
	for _, id := range []string{"a", "b"} {
		c, err := client.New(bootstrap(lis.Addr().String(), id), client.Options{Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		got := make(chan *clusterv3.Cluster, 1)
		cancel, err := client.WatchTyped(ctx, c, "backend", func(e client.TypedEvent[*clusterv3.Cluster]) {
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
		fmt.Println(id, (<-got).GetConnectTimeout().AsDuration())
		cancel()
		c.Close()
	}
	fmt.Println("upstream streams:", len(srv.Streams()))
	// Output:
	// a 1s
	// b 1s
	// upstream streams: 1
}

// bootstrap is the bootstrap of a node that gets its configuration from
// the xDS server at addr.
func bootstrap(addr, node string) *client.Bootstrap {
	return &client.Bootstrap{
		Servers: []client.ServerConfig{{URI: addr, ChannelCreds: []client.ChannelCreds{{Type: "insecure"}}}},
		Node:    &corev3.Node{Id: node},
	}
}
