package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/relayrole"
	"github.com/xdsd/xdsd/internal/tuning/initgc"
)

type relayFlags struct {
	daemonFlags
	upstream, bootstrap, transport, nodeID string
	cacheLinger                            time.Duration
}

func runRelay(args []string, stdout, stderr io.Writer) error {
	initgc.Settle() // a long-running command: GOGC is its own from the start
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	var f relayFlags
	fs.StringVar(&f.upstream, "upstream", "", "the upstream xDS server (every authority goes to it)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "gRPC xDS bootstrap file naming the upstreams (federation: each authority's servers)")
	fs.StringVar(&f.transport, "upstream-transport", "delta", "delta or sotw, with --upstream")
	fs.StringVar(&f.nodeID, "node-id", "xdsd-relay", "node id the relay presents upstream (with --upstream)")
	fs.DurationVar(&f.cacheLinger, "cache-linger", 5*time.Minute, "keep an upstream subscription, and its cache entry fresh, this long after its last downstream left (0: none)")
	f.register(fs, "127.0.0.1:18100", "127.0.0.1:18101")
	pos, err := parse(fs, args, "relay --upstream ADDR | --bootstrap FILE [flags]", stdout)
	if err != nil {
		return err
	}
	f.noteExplicit(fs)
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if (f.upstream == "") == (f.bootstrap == "") {
		return usagef("give exactly one of --upstream ADDR and --bootstrap FILE")
	}
	if f.cacheLinger < 0 {
		return usagef("--cache-linger %s: want a duration of 0 or more", f.cacheLinger)
	}
	if f.transport != "delta" && f.transport != "sotw" {
		return usagef("--upstream-transport %q: want delta or sotw", f.transport)
	}
	log, err := newLogger(f.logLevel, f.logFormat, stderr)
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
	if err := f.load(f.adminAddr, log); err != nil {
		return err
	}
	b, err := relayBootstrap(f)
	if err != nil {
		return err
	}
	// A server the relay cannot dial would leave every name it serves
	// unanswered, and downstream clients told they do not exist: refuse to
	// start instead.
	if err := b.CheckCredentials(); err != nil {
		return err
	}
	f.warnExposure(log, true)
	reg := newRegistry()
	ro := relayrole.Options{Logger: log, Registerer: reg, MaxSubscriptions: f.maxSubs, MaxSubscriptionBytes: f.maxSubBytes,
		MaxConnSubscriptionBytes: f.maxConnSubBytes, RequestRate: f.rate, RequestBurst: f.burst, CacheLinger: f.cacheLinger}
	if f.guard != nil {
		ro.Guard = f.guard // a nil *policy.Policy is no Guard
	}
	r, err := relayrole.New(b, ro)
	if err != nil {
		return err
	}
	d, err := listen(f.daemonFlags, log, reg, r.Register, admin.Handler(f.adminAuth(f.adminAddr, admin.Options{
		Resources: r.Resources, Gatherer: reg, Logger: log,
		Clients: func() any { return r.Streams() },
		Groups:  func(context.Context) ([]fleet.Group, error) { return r.Protocol().Groups(), nil },
		Page: func(_ context.Context, q protocol.ClientQuery) (protocol.ClientPage, error) {
			return r.Protocol().Page(q), nil
		},
		Upstream: func() any { return r.Upstreams() },
	})))
	if err != nil {
		r.Close()
		return err
	}
	for _, n := range d.notes {
		log.Warn(n)
	}
	d.start()
	d.serving() // a relay serves from its cache, whatever its upstream's state
	var ups []string
	for _, s := range b.Servers {
		ups = append(ups, s.URI)
	}
	log.Info("xdsd relay serving", "xds", d.xdsAddr(), "admin", d.adminAddr(), "upstream", ups)
	if ready != nil {
		ready(d.xdsAddr(), d.adminAddr())
	}
	err = d.wait(ctx)
	log.Info("shutting down")
	d.stop(r.Close)
	return err
}
