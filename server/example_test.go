package server_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/server"
)

// A program embeds a server, applies a batch, and serves it on a
// listener; any xDS client (here the client package) gets it.
func ExampleServer_Apply() {
	srv, err := server.New(context.Background(), server.Options{Logger: quiet}) // in memory
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	var b server.Batch
	if err := b.Put("backend", &clusterv3.Cluster{
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
		ConnectTimeout:       durationpb.New(time.Second),
	}); err != nil {
		log.Fatal(err)
	}
	res, err := srv.Apply(context.Background(), b)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("revision", res.Rev, "changed", res.Puts[0].Name)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)

	c := newClient(lis.Addr().String(), nil)
	defer c.Close()
	fmt.Println(get[*clusterv3.Cluster](c, "backend").GetConnectTimeout().AsDuration())
	// Output:
	// revision 1 changed backend
	// 1s
}

// TP2 variants: one resource, a variant per value of a dynamic parameter;
// each client gets the variant its parameters select.
func ExampleBatch_Put_variants() {
	srv, err := server.New(context.Background(), server.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	var b server.Batch
	for env, timeout := range map[string]time.Duration{"prod": time.Second, "staging": 5 * time.Second} {
		err := b.Put("backend", &clusterv3.Cluster{
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
			ConnectTimeout:       durationpb.New(timeout),
		}, constraint.Value("env", env))
		if err != nil {
			log.Fatal(err)
		}
	}
	if _, err := srv.Apply(context.Background(), b); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(lis)

	for _, env := range []string{"prod", "staging"} {
		c := newClient(lis.Addr().String(), map[string]string{"env": env})
		fmt.Println(env, get[*clusterv3.Cluster](c, "backend").GetConnectTimeout().AsDuration())
		c.Close()
	}
	// Output:
	// prod 1s
	// staging 5s
}
