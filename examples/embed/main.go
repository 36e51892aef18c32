// Command embed is an xDS control plane in a page of Go: it serves a
// toy service registry — a directory of YAML files, one per service — to
// proxyless gRPC clients and Envoy, through xdsd's embedding API (package
// server) and nothing else of xdsd.
//
//	go run ./examples/embed -dir examples/embed/services -addr 127.0.0.1:18000
//
// A service file says where a service runs:
//
//	name: greeter
//	port: 50051
//	endpoints: [127.0.0.1, 127.0.0.2]
//
// and a gRPC client with a bootstrap naming the server dials
// xds:///greeter. Each service becomes a listener, a route configuration,
// a cluster and its endpoints (registry.go); the server pulls the
// directory (a server.Source) every -poll and serves what changed,
// removing the resources of a deleted file.
package main

import (
	"context"
	"flag"
	"log"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"time"

	"github.com/xdsd/xdsd/server"
)

func main() {
	dir := flag.String("dir", "services", "directory of service files (*.service, YAML)")
	addr := flag.String("addr", "127.0.0.1:18000", "xDS address")
	poll := flag.Duration("poll", time.Second, "how often to read the directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(ctx, Registry{Dir: *dir}, lis, *poll, slog.Default()); err != nil {
		log.Fatal(err)
	}
}

// run serves reg on lis until ctx ends, reading it every poll.
func run(ctx context.Context, reg Registry, lis net.Listener, poll time.Duration, log *slog.Logger) error {
	srv, err := server.New(ctx, server.Options{Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	go srv.Serve(lis)
	log.Info("serving", "xds", lis.Addr().String(), "registry", reg.Dir)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	trigger := make(chan struct{})
	go func() {
		defer close(trigger)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case trigger <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return srv.Follow(ctx, reg, trigger)
}
