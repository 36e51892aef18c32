package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/xdsd/xdsd/admin"
	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/protocol"
	"github.com/xdsd/xdsd/relay"
)

type relayFlags struct {
	upstream, bootstrap, transport, nodeID string
	xdsAddr, adminAddr, logLevel           string
	maxSubs, maxMsg, burst                 int
	rate                                   float64
}

func runRelay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	var f relayFlags
	fs.StringVar(&f.upstream, "upstream", "", "the upstream xDS server (every authority goes to it)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "gRPC xDS bootstrap file naming the upstreams (federation: each authority's servers)")
	fs.StringVar(&f.transport, "upstream-transport", "delta", "delta or sotw, with --upstream")
	fs.StringVar(&f.nodeID, "node-id", "xdsd-relay", "node id the relay presents upstream (with --upstream)")
	fs.StringVar(&f.xdsAddr, "xds-addr", "127.0.0.1:18100", "address the downstream xDS services listen on")
	fs.StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:18101", "address of the HTTP admin API (empty: none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&f.maxSubs, "max-subscriptions", 100000, "subscriptions one downstream stream may hold")
	fs.IntVar(&f.maxMsg, "max-msg-size", 16<<20, "largest request message accepted, in bytes")
	fs.Float64Var(&f.rate, "request-rate", 100, "requests per second one downstream stream may sustain")
	fs.IntVar(&f.burst, "request-burst", 1000, "requests one downstream stream may send in a burst")
	if _, err := parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helpFlags(fs, "relay --upstream ADDR | --bootstrap FILE [flags]", stdout)
		}
		return err
	}
	if (f.upstream == "") == (f.bootstrap == "") {
		return usagef("give exactly one of --upstream ADDR and --bootstrap FILE")
	}
	if f.transport != "delta" && f.transport != "sotw" {
		return usagef("--upstream-transport %q: want delta or sotw", f.transport)
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveRelay(ctx, f, log, nil)
}

func relayBootstrap(f relayFlags) (*client.Bootstrap, error) {
	if f.bootstrap != "" {
		return client.LoadBootstrap(f.bootstrap)
	}
	js, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{"server_uri": f.upstream, "channel_creds": []any{map[string]any{"type": "insecure"}}, "transport": f.transport}},
		"node":        map[string]any{"id": f.nodeID},
	})
	return client.ParseBootstrap(js)
}

// serveRelay runs a relay until ctx ends; ready, if set, gets the bound
// addresses.
func serveRelay(ctx context.Context, f relayFlags, log *slog.Logger, ready func(xds, admin string)) error {
	b, err := relayBootstrap(f)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r, err := relay.New(b, relay.Options{Logger: log, Registerer: reg, Protocol: protocol.Options{
		MaxSubscriptions: f.maxSubs, RequestRate: f.rate, RequestBurst: f.burst}})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", f.xdsAddr)
	if err != nil {
		r.Close()
		return fmt.Errorf("xDS listener: %w", err)
	}
	g := grpc.NewServer(protocol.ServerCodec(), grpc.MaxRecvMsgSize(f.maxMsg),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	r.Register(g)
	errc := make(chan error, 2)
	go func() { errc <- g.Serve(lis) }()
	adminAddr := ""
	var hs *http.Server
	if f.adminAddr != "" {
		alis, err := net.Listen("tcp", f.adminAddr)
		if err != nil {
			g.Stop()
			r.Close()
			return fmt.Errorf("admin listener: %w", err)
		}
		adminAddr = alis.Addr().String()
		hs = &http.Server{Handler: admin.Handler(admin.Options{
			Resources: r.Resources, Gatherer: reg, Logger: log,
			Clients:  func() any { return r.Clients() },
			Upstream: func() any { return r.Upstreams() },
		}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var ups []string
	for _, s := range b.Servers {
		ups = append(ups, s.URI)
	}
	log.Info("xdsd relay serving", "xds", lis.Addr().String(), "admin", adminAddr, "upstream", ups)
	if ready != nil {
		ready(lis.Addr().String(), adminAddr)
	}
	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	log.Info("shutting down")
	if hs != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		hs.Shutdown(sctx)
		cancel()
	}
	r.Close()
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	return err
}
