package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// Watch a resource: the handler is told its value, every change, and its
// removal.
func ExampleClient_Watch() {
	quiet := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	srv, err := server.New(ctx, server.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)
	setTimeout := func(d time.Duration) {
		var b server.Batch
		err := b.Put("backend", &clusterv3.Cluster{
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
			ConnectTimeout: durationpb.New(d),
		})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := srv.Apply(ctx, b); err != nil {
			log.Fatal(err)
		}
	}
	setTimeout(time.Second)

	c, err := client.New(&client.Bootstrap{
		Servers: []client.ServerConfig{{URI: lis.Addr().String(), ChannelCreds: []client.ChannelCreds{{Type: "insecure"}}}},
		Node:    &corev3.Node{Id: "example"},
	}, client.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	events := make(chan string)
	cancel, err := c.Watch(ctx, resource.ClusterURL, "backend", func(e client.Event) {
		s := e.Kind.String()
		if m, err := e.Message(); err == nil && m != nil {
			s += fmt.Sprint(" ", m.(*clusterv3.Cluster).GetConnectTimeout().AsDuration(), " version ", e.Variant.Version)
		}
		events <- s
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cancel()
	fmt.Println(<-events)
	setTimeout(2 * time.Second)
	fmt.Println(<-events)
	if _, err := srv.Apply(ctx, server.Batch{Deletes: []server.Delete{{Type: resource.ClusterURL, Name: "backend", All: true}}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-events)
	// Output:
	// updated 1s version 1
	// updated 2s version 2
	// removed
}
