package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/inflight"
	"github.com/xdsd/xdsd/internal/protocol"
)

// The defaults of the port limits.
const (
	defaultMaxConns       = 50000
	defaultMaxStreams     = 100
	defaultAdminMaxConns  = 256
	defaultAdminPerSource = 16
	// adminProbeReserve is how many connections past
	// --admin-max-connections are taken for /healthz and /readyz only.
	adminProbeReserve = 8
	// adminHeaderTimeout bounds the TLS handshake and the request headers
	// of an admin connection: a client that has not said who it is
	// cannot hold a slot for longer.
	adminHeaderTimeout      = 2 * time.Second
	defaultAdminReadTimeout = 2 * time.Minute
	// The subscription state of one stream, and of one connection's
	// streams together (internal/protocol/subbytes.go): a stream holds
	// --max-subscriptions of names up to about 60 bytes, a connection two
	// such streams.
	defaultMaxSubBytes     = 128 << 20
	defaultMaxConnSubBytes = 256 << 20
	// defaultMaxConnReqBytes bounds the requests one xDS connection sends
	// that are not yet complete (internal/inflight.DefaultLimit says why),
	// against 1.6 GiB without it.
	defaultMaxConnReqBytes = inflight.DefaultLimit
)

// daemonFlags are the flags of the long-running commands (serve, relay):
// where they listen and what one downstream stream may do.
type daemonFlags struct {
	xdsAddr, adminAddr, logLevel, logFormat string
	maxSubs, maxMsg, burst                  int
	rate                                    float64
	maxConns, maxStreams, adminMaxConns     int
	adminPerSource                          int
	maxApplies                              int
	maxApplyBytes                           int64
	maxSubBytes, maxConnSubBytes            int64
	maxConnReqBytes                         int64
	adminReadTimeout                        time.Duration
	securityFlags                           // security.go
	// xdsDefault and adminDefault say that --xds-addr and --admin-addr
	// were left to their defaults: a default port another process holds
	// is then replaced by a free one (noteExplicit).
	xdsDefault, adminDefault bool
}

// noteExplicit records which addresses the command line left to their
// defaults; call it once the flags are parsed.
func (f *daemonFlags) noteExplicit(fs *flag.FlagSet) {
	f.xdsDefault, f.adminDefault = true, true
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "xds-addr":
			f.xdsDefault = false
		case "admin-addr":
			f.adminDefault = false
		}
	})
}

// bind listens on addr. When addr is a default the command line did not
// give and another process holds its port, it listens on a free port of
// the same host instead, and note says so: the first command a newcomer
// runs works on a machine where something already took 18000. An
// address given with the flag is bound as given, or fails naming it.
func bind(addr string, isDefault bool, flagName, what string) (l net.Listener, note string, err error) {
	l, err = net.Listen("tcp", addr)
	if err == nil || !isDefault || !errors.Is(err, syscall.EADDRINUSE) {
		if err != nil {
			err = bindHint(err, flagName)
		}
		return l, "", err
	}
	host, _, _ := net.SplitHostPort(addr)
	l, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, "", bindHint(err, flagName)
	}
	return l, fmt.Sprintf("%s is taken by another process: %s listens on %s instead (give %s to choose)", addr, what, l.Addr(), flagName), nil
}

func (f *daemonFlags) register(fs *flag.FlagSet, xdsAddr, adminAddr string) {
	fs.StringVar(&f.xdsAddr, "xds-addr", xdsAddr, "address the xDS gRPC services listen on")
	fs.StringVar(&f.adminAddr, "admin-addr", adminAddr, "address of the HTTP admin API (empty: none)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.IntVar(&f.maxSubs, "max-subscriptions", 100000, "subscriptions one stream may hold (at least 1)")
	fs.Int64Var(&f.maxSubBytes, "max-subscription-bytes", defaultMaxSubBytes, "bytes of subscription state one stream may hold; more is refused with RESOURCE_EXHAUSTED (at least 1)")
	fs.Int64Var(&f.maxConnSubBytes, "max-connection-subscription-bytes", defaultMaxConnSubBytes, "bytes of subscription state all the streams of one xDS connection may hold together (at least 1)")
	fs.IntVar(&f.maxMsg, "max-msg-size", 16<<20, "largest request message accepted, in bytes (at least 1)")
	fs.Int64Var(&f.maxConnReqBytes, "max-connection-request-bytes", defaultMaxConnReqBytes, "bytes of requests being read or handled that one xDS connection may make the server hold, all its streams together; a connection sending more is closed (at least --max-msg-size)")
	fs.Float64Var(&f.rate, "request-rate", 100, "requests per second one stream may sustain (greater than 0)")
	fs.IntVar(&f.burst, "request-burst", 1000, "requests one stream may send in a burst (at least 1)")
	fs.IntVar(&f.maxConns, "max-connections", defaultMaxConns, "connections the xDS port holds open; more are closed at once (at least 1)")
	fs.IntVar(&f.maxStreams, "max-streams-per-connection", defaultMaxStreams, "concurrent gRPC streams on one xDS connection (at least 1)")
	fs.IntVar(&f.adminMaxConns, "admin-max-connections", defaultAdminMaxConns, "connections the admin port holds open; more are closed at once (at least 1), but for a reserve of 8 answering /healthz and /readyz only")
	fs.IntVar(&f.adminPerSource, "admin-max-connections-per-source", defaultAdminPerSource, "admin connections one source (an IPv4 address, an IPv6 /64) may hold open; more are closed at once (at least 1)")
	fs.DurationVar(&f.adminReadTimeout, "admin-read-timeout", defaultAdminReadTimeout, "time to read a whole admin request, body included (positive)")
	fs.IntVar(&f.maxApplies, "max-concurrent-applies", 2, "applies and deletes processed at once; more are answered 429 with Retry-After (at least 1)")
	fs.Int64Var(&f.maxApplyBytes, "max-apply-bytes-in-flight", 512<<20, "bytes of apply bodies being read or applied at once; more are answered 429 (at least 1)")
	f.registerSecurity(fs)
}

// check rejects limits that would refuse every stream or be silently
// replaced by the defaults.
func (f daemonFlags) check() error {
	switch {
	case f.maxSubs < 1:
		return usagef("--max-subscriptions %d: want at least 1", f.maxSubs)
	case f.maxSubBytes < 1:
		return usagef("--max-subscription-bytes %d: want at least 1 (bytes)", f.maxSubBytes)
	case f.maxConnSubBytes < 1:
		return usagef("--max-connection-subscription-bytes %d: want at least 1 (bytes)", f.maxConnSubBytes)
	case f.maxMsg < 1:
		return usagef("--max-msg-size %d: want at least 1 (bytes)", f.maxMsg)
	case f.maxConnReqBytes < int64(f.maxMsg):
		return usagef("--max-connection-request-bytes %d: want at least --max-msg-size (%d bytes), or a request of that size could never be read; raise it, or lower --max-msg-size", f.maxConnReqBytes, f.maxMsg)
	case !(f.rate > 0) || math.IsInf(f.rate, 1):
		return usagef("--request-rate %v: want a finite number greater than 0 (requests per second)", f.rate)
	case f.burst < 1:
		return usagef("--request-burst %d: want at least 1", f.burst)
	case f.maxConns < 1:
		return usagef("--max-connections %d: want at least 1", f.maxConns)
	case f.maxStreams < 1:
		return usagef("--max-streams-per-connection %d: want at least 1", f.maxStreams)
	case f.adminMaxConns < 1:
		return usagef("--admin-max-connections %d: want at least 1", f.adminMaxConns)
	case f.adminPerSource < 1:
		return usagef("--admin-max-connections-per-source %d: want at least 1", f.adminPerSource)
	case f.adminReadTimeout <= 0:
		return usagef("--admin-read-timeout %v: want a positive duration", f.adminReadTimeout)
	case f.maxApplies < 1:
		return usagef("--max-concurrent-applies %d: want at least 1", f.maxApplies)
	case f.maxApplyBytes < 1:
		return usagef("--max-apply-bytes-in-flight %d: want at least 1", f.maxApplyBytes)
	}
	return nil
}

// withDefaults fills in the limits left zero (flags set by code, not
// parsed: the flags' own defaults).
func (f daemonFlags) withDefaults() daemonFlags {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&f.maxConns, defaultMaxConns)
	def(&f.maxStreams, defaultMaxStreams)
	def(&f.adminMaxConns, defaultAdminMaxConns)
	def(&f.adminPerSource, defaultAdminPerSource)
	if f.maxConnReqBytes <= 0 {
		f.maxConnReqBytes = max(defaultMaxConnReqBytes, int64(f.maxMsg))
	}
	if f.adminReadTimeout <= 0 {
		f.adminReadTimeout = defaultAdminReadTimeout
	}
	return f
}

// applyLimits are the bounds on admin writes.
func (f daemonFlags) applyLimits() admin.Limits {
	return admin.Limits{Concurrent: f.maxApplies, Bytes: f.maxApplyBytes}
}

func (f daemonFlags) protocolOptions() protocol.Options {
	o := protocol.Options{MaxSubscriptions: f.maxSubs, MaxSubscriptionBytes: f.maxSubBytes, MaxConnSubscriptionBytes: f.maxConnSubBytes,
		RequestRate: f.rate, RequestBurst: f.burst}
	if f.guard != nil {
		o.Guard = f.guard
	}
	return o
}

// newRegistry is a daemon's metrics registry, with the Go and process
// collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// daemon is the listening half of serve and relay: the xDS gRPC server and
// the admin HTTP server.
type daemon struct {
	g         *grpc.Server
	health    *health.Server
	lis, alis net.Listener
	hs        *http.Server
	errc      chan error
	// notes say what the daemon did that the command line did not ask
	// for (a default port taken): logged as warnings by the caller.
	notes []string
}

// listen binds the xDS address and, unless it is empty, the admin one, for
// the xDS services register adds and the admin handler. Nothing is served
// before start.
func listen(f daemonFlags, log *slog.Logger, reg prometheus.Registerer, register func(*grpc.Server), adminHandler http.Handler) (*daemon, error) {
	f = f.withDefaults()
	lis, note, err := bind(f.xdsAddr, f.xdsDefault, "--xds-addr", "xDS")
	if err != nil {
		return nil, fmt.Errorf("xDS listener: %w", err)
	}
	d := &daemon{lis: newLimitListener(lis, f.maxConns, "xds", reg), errc: make(chan error, 4)} // one each: gRPC, admin, and the caller's (serve's store follower)
	if note != "" {
		d.notes = append(d.notes, note)
	}
	if f.adminAddr != "" {
		alis, note, err := bind(f.adminAddr, f.adminDefault, "--admin-addr", "the admin API")
		if err != nil {
			lis.Close()
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		if note != "" {
			d.notes = append(d.notes, note)
		}
		ll := newLimitListener(alis, f.adminMaxConns, "admin", reg)
		ll.perSource, ll.reserve = f.adminPerSource, adminProbeReserve
		d.alis = f.adminListener(ll)
		// Slow or idle admin clients cannot hold connections for long:
		// the TLS handshake and the headers within adminHeaderTimeout
		// (net/http bounds the handshake by it too), the whole request
		// within --admin-read-timeout. An answer to a request without a
		// valid credential closes the connection (internal/admin).
		d.hs = &http.Server{Handler: probesOnReserve(adminHandler), ConnContext: markProbeOnly, ReadHeaderTimeout: adminHeaderTimeout,
			ReadTimeout: f.adminReadTimeout, IdleTimeout: 2 * time.Minute}
	}
	// Every connection, TLS or plaintext, is read through the bound on
	// requests not yet complete (internal/inflight): gRPC's flow control
	// lets each stream hold one of --max-msg-size.
	refused := inflight.RefusedCounter()
	if reg != nil {
		reg.MustRegister(refused)
	}
	creds := inflight.Creds(f.transportCreds(), inflight.Options{Limit: f.maxConnReqBytes, Setting: "--max-connection-request-bytes", Logger: log, Refused: refused})
	// protocol.ServerOptions: xdsd's codec and one goroutine per idle
	// stream (memory per stream, BENCHMARKS.md (e)). The write buffer
	// idle connections share is gRPC's default, not an option set here.
	d.g = grpc.NewServer(append(protocol.ServerOptions(), grpc.Creds(creds), grpc.MaxRecvMsgSize(f.maxMsg), grpc.MaxConcurrentStreams(uint32(f.maxStreams)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))...)
	register(d.g)
	// Standard tools find the daemon: grpc.health.v1 (NOT_SERVING until
	// the role says it is ready) and server reflection (grpcurl lists and
	// describes the xDS, CSDS and health services).
	d.health = health.NewServer()
	d.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(d.g, d.health)
	reflection.Register(d.g)
	return d, nil
}

// serving marks the daemon SERVING in grpc.health.v1.
func (d *daemon) serving() { d.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) }

// xdsAddr and adminAddr are the bound addresses ("" for no admin API).
func (d *daemon) xdsAddr() string { return d.lis.Addr().String() }

func (d *daemon) adminAddr() string {
	if d.alis == nil {
		return ""
	}
	return d.alis.Addr().String()
}

// start serves both listeners.
func (d *daemon) start() {
	go func() { d.errc <- d.g.Serve(d.lis) }()
	if d.hs != nil {
		go func() {
			if err := d.hs.Serve(d.alis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				d.errc <- err
			}
		}()
	}
}

// wait returns when ctx ends (nil) or a listener fails (its error).
func (d *daemon) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.errc:
		return err
	}
}

// stop shuts the admin API down, lets endStreams end the xDS streams
// (they never end on their own; clients reconnect at once), then stops
// gRPC gracefully with a deadline for anything else.
func (d *daemon) stop(endStreams func()) {
	d.health.Shutdown()
	if d.hs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d.hs.Shutdown(ctx)
		cancel()
	}
	endStreams()
	done := make(chan struct{})
	go func() { d.g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		d.g.Stop()
	}
}
