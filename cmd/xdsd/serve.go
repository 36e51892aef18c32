package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/xdsd/xdsd/admin"
	"github.com/xdsd/xdsd/protocol"
	"github.com/xdsd/xdsd/server"
	"github.com/xdsd/xdsd/store"
	"github.com/xdsd/xdsd/store/bolt"
	"github.com/xdsd/xdsd/store/mem"
)

func newLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// openStore opens a --store value: bolt:PATH or mem:.
func openStore(spec string) (store.Store, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "bolt":
		if arg == "" {
			return nil, usagef("--store bolt: needs a path, e.g. bolt:./xdsd.db")
		}
		return bolt.Open(arg, bolt.Options{})
	case "mem":
		return mem.New(), nil
	case "etcd":
		return nil, usagef("--store %s: the etcd backend is not built yet; use bolt:PATH or mem:", spec)
	}
	return nil, usagef("--store %q: want bolt:PATH or mem:", spec)
}

type serveFlags struct {
	xdsAddr, adminAddr, storeSpec, watchDir, logLevel string
	watchInterval                                     time.Duration
	maxSubs, maxMsg, burst                            int
	rate                                              float64
}

func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	fs.StringVar(&f.xdsAddr, "xds-addr", "127.0.0.1:18000", "address the xDS gRPC services listen on")
	fs.StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:18001", "address of the HTTP admin API (empty: none)")
	fs.StringVar(&f.storeSpec, "store", "bolt:./xdsd.db", "store: bolt:PATH (embedded, durable) or mem: (nothing survives)")
	fs.StringVar(&f.watchDir, "watch", "", "apply this directory of resource files at start and on every change")
	fs.DurationVar(&f.watchInterval, "watch-interval", 500*time.Millisecond, "how often --watch looks for changes")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&f.maxSubs, "max-subscriptions", 100000, "subscriptions one stream may hold")
	fs.IntVar(&f.maxMsg, "max-msg-size", 16<<20, "largest request message accepted, in bytes")
	fs.Float64Var(&f.rate, "request-rate", 100, "requests per second one stream may sustain")
	fs.IntVar(&f.burst, "request-burst", 1000, "requests one stream may send in a burst")
	if _, err := parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			helpFlags(fs, "serve [flags]", stdout)
		}
		return err
	}
	log, err := newLogger(f.logLevel, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, f, log, nil)
}

// serve runs the server until ctx ends. ready, if set, receives the bound
// addresses once both listeners are up (tests use it).
func serve(ctx context.Context, f serveFlags, log *slog.Logger, ready func(xds, admin string)) error {
	st, err := openStore(f.storeSpec)
	if err != nil {
		return err
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := server.New(st, server.Options{Logger: log, Registerer: reg, Protocol: protocol.Options{
		MaxSubscriptions: f.maxSubs, RequestRate: f.rate, RequestBurst: f.burst}})

	if f.watchDir != "" {
		w := &server.DirWatcher{Store: st, Dir: f.watchDir, Interval: f.watchInterval, Logger: log}
		if _, err := w.Sync(ctx); err != nil {
			return fmt.Errorf("--watch %s: %w", f.watchDir, err)
		}
		log.Info("watching directory", "dir", f.watchDir, "revision", st.Rev())
		go w.Run(ctx)
	}

	lis, err := net.Listen("tcp", f.xdsAddr)
	if err != nil {
		return fmt.Errorf("xDS listener: %w", err)
	}
	g := grpc.NewServer(protocol.ServerCodec(),
		grpc.MaxRecvMsgSize(f.maxMsg),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	srv.Register(g)

	errc := make(chan error, 3)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { errc <- srv.Run(runCtx) }()
	go func() { errc <- g.Serve(lis) }()

	adminAddr := ""
	var hs *http.Server
	if f.adminAddr != "" {
		alis, err := net.Listen("tcp", f.adminAddr)
		if err != nil {
			g.Stop()
			return fmt.Errorf("admin listener: %w", err)
		}
		adminAddr = alis.Addr().String()
		hs = &http.Server{Handler: admin.Handler(admin.Options{
			Store: st, Ready: srv.Ready, Gatherer: reg, Logger: log,
			Clients: func() any { return srv.Clients() },
		}), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := hs.Serve(alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	// Report readiness once the store's state is loaded (an interrupted
	// load falls through to the shutdown below).
	if srv.WaitRev(ctx, st.Rev()) == nil {
		log.Info("xdsd serving", "xds", lis.Addr().String(), "admin", adminAddr, "store", f.storeSpec, "revision", st.Rev())
		if ready != nil {
			ready(lis.Addr().String(), adminAddr)
		}
	}

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	log.Info("shutting down")
	cancel()
	if hs != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		hs.Shutdown(sctx)
		scancel()
	}
	// xDS streams never end on their own: end them (clients reconnect at
	// once), then stop gracefully, with a deadline for anything else.
	srv.Close()
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
	return err
}
