package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
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
	r *relayrole.Relay
}

// New starts a relay of the upstreams in b (federation: each authority's
// servers). Register it on a gRPC server made with
// server.GRPCServerOptions(): a relay sends responses encoded once for all
// its downstream clients, as a server does.
func New(b *client.Bootstrap, o Options) (*Relay, error) {
	r, err := relayrole.New(b, relayrole.Options{Client: o.Client, MaxSubscriptions: o.MaxSubscriptions,
		RequestRate: o.RequestRate, RequestBurst: o.RequestBurst, Logger: o.Logger, Registerer: o.Registerer,
		CacheLinger: o.CacheLinger, PendingWait: o.pendingWait})
	if err != nil {
		return nil, err
	}
	return &Relay{r: r}, nil
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
