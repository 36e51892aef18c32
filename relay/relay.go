package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/inflight"
	"github.com/xdsd/xdsd/internal/relayrole"
	"github.com/xdsd/xdsd/resource"
)

// Options configure a Relay.
type Options struct {
	// Client configures the upstream client (its node, timeouts).
	Client client.Options
	// MaxSubscriptions bounds the names one downstream stream may
	// subscribe to, all types together (default 100000).
	MaxSubscriptions int
	// RequestRate is the sustained requests per second one downstream
	// stream may send and RequestBurst the burst above it (defaults 100/s
	// and 1000).
	RequestRate  float64
	RequestBurst int
	// MaxSubscriptionBytes and MaxConnectionSubscriptionBytes bound the
	// memory of one downstream stream's subscriptions, and of all the
	// streams of one connection together (defaults 128 MiB and 256 MiB;
	// zero means the default), as server.Options' fields of the same names
	// do: a request that would pass either ends its stream with
	// RESOURCE_EXHAUSTED.
	MaxSubscriptionBytes           int64
	MaxConnectionSubscriptionBytes int64
	// MaxConnectionRequestBytes bounds the bytes of requests one
	// downstream connection has begun and not finished, or sent and not
	// yet had handled, all its streams together (default 64 MiB; zero means the default), as
	// server.Options.MaxConnectionRequestBytes does. The relay has no gRPC
	// server of its own: the bound applies to the one made with
	// TransportCredentials.
	MaxConnectionRequestBytes int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (none when nil).
	Registerer prometheus.Registerer
	// CacheLinger keeps an upstream subscription, and its cache entry
	// fresh, this long after the last downstream of its (type, name,
	// parameters) has left: short-lived clients (jobs, CLIs, a client
	// making one call) find a warm cache, and one connecting while the
	// upstream is down is still served. Zero: none (xdsd relay's
	// --cache-linger defaults to 5m).
	CacheLinger time.Duration

	pendingWait time.Duration // relayrole.Options.PendingWait; tests shorten it
}

// Relay serves downstream xDS streams from a cache of its upstreams.
type Relay struct {
	r        *relayrole.Relay
	inflight inflight.Options
}

// New starts a relay of the upstreams in b (federation: each authority's
// servers). Register it on a gRPC server made with
// server.GRPCServerOptions(): a relay sends responses encoded once for all
// its downstream clients, as a server does; and with its
// TransportCredentials, which bound the requests a connection sends.
func New(b *client.Bootstrap, o Options) (*Relay, error) {
	r, err := relayrole.New(b, relayrole.Options{Client: o.Client, MaxSubscriptions: o.MaxSubscriptions,
		MaxSubscriptionBytes: o.MaxSubscriptionBytes, MaxConnSubscriptionBytes: o.MaxConnectionSubscriptionBytes,
		RequestRate: o.RequestRate, RequestBurst: o.RequestBurst, Logger: o.Logger, Registerer: o.Registerer,
		CacheLinger: o.CacheLinger, PendingWait: o.pendingWait})
	if err != nil {
		return nil, err
	}
	bound := inflight.Options{Limit: o.MaxConnectionRequestBytes, Setting: "relay.Options.MaxConnectionRequestBytes",
		Logger: o.Logger, Refused: inflight.RefusedCounter()}
	if o.Registerer != nil {
		o.Registerer.MustRegister(bound.Refused)
	}
	return &Relay{r: r, inflight: bound}, nil
}

// TransportCredentials returns creds (nil: plaintext) with the bound of
// Options.MaxConnectionRequestBytes on every connection a gRPC server made
// with them accepts (server.Server.TransportCredentials says how). Create
// the gRPC server the relay is registered on with them:
// grpc.NewServer(append(server.GRPCServerOptions(),
// grpc.Creds(r.TransportCredentials(tlsCreds)))...).
func (r *Relay) TransportCredentials(creds credentials.TransportCredentials) credentials.TransportCredentials {
	return inflight.Creds(creds, r.inflight)
}

// Register registers every xDS service on g.
func (r *Relay) Register(g *grpc.Server) { r.r.Register(g) }

// Close ends the downstream streams and the upstream ones.
func (r *Relay) Close() { r.r.Close() }

// Upstreams reports the upstream streams.
func (r *Relay) Upstreams() []client.Upstream { return r.r.Upstreams() }

// Resources lists what the cache holds, for the admin API.
func (r *Relay) Resources(ctx context.Context) (int64, []*resource.Variant, error) {
	return r.r.Resources(ctx)
}
