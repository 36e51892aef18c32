package relay

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/rolehook"
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

	pendingWait time.Duration // Policy.PendingWait; tests shorten it
	// guard is the downstream access policy xdsd relay --policy sets
	// (through rolehook): an internal type, not part of the API.
	guard protocol.Guard
}

// Relay serves downstream xDS streams from a cache of its upstreams.
type Relay struct {
	client *client.Client
	cache  *db.DB // the client's, served by proto
	proto  *protocol.Server
	hits   *prometheus.CounterVec
	misses *prometheus.CounterVec
	// Upstream subscriptions kept by CacheLinger with no downstream, and
	// those a downstream took up again.
	lingering prometheus.Gauge
	revived   prometheus.Counter
}

// New starts a relay of the upstreams in b (federation: each authority's
// servers). Register it on a gRPC server made with
// server.GRPCServerOptions(): a relay sends responses encoded once for all
// its downstream clients, as a server does.
func New(b *client.Bootstrap, o Options) (*Relay, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	r := &Relay{
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_relay_cache_hits_total",
			Help: "Downstream subscriptions answered from the cache at once, by resource type."}, []string{"type"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_relay_cache_misses_total",
			Help: "Downstream subscriptions that had to wait for the upstream, by resource type."}, []string{"type"}),
		lingering: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xdsd_relay_lingering_subscriptions",
			Help: "Upstream subscriptions kept fresh after their last downstream left (--cache-linger)."}),
		revived: prometheus.NewCounter(prometheus.CounterOpts{Name: "xdsd_relay_lingering_revived_total",
			Help: "Lingering upstream subscriptions a downstream subscribed to again before they ended."}),
	}
	p := r.policy(o)
	co := o.Client
	co.Logger = o.Logger
	newCache := cachepolicy.NewCache.(func(*client.Bootstrap, client.Options, cachepolicy.Policy) (*client.Client, *db.DB, error))
	c, cache, err := newCache(b, co, p)
	if err != nil {
		return nil, err
	}
	r.client, r.cache = c, cache
	po := protocol.Options{MaxSubscriptions: o.MaxSubscriptions, RequestRate: o.RequestRate, RequestBurst: o.RequestBurst,
		Logger: o.Logger, Registerer: o.Registerer, Guard: o.guard}
	r.proto = protocol.NewCacheServer(cache, po, p)
	if o.Registerer != nil {
		o.Registerer.MustRegister(r.hits, r.misses, r.lingering, r.revived, &upstreamCollector{c: c})
	}
	return r, nil
}

// policy is what makes this cache a relay: the rules it hands both the
// client that fills the cache and the protocol engine that serves it.
func (r *Relay) policy(o Options) cachepolicy.Policy {
	return cachepolicy.Policy{
		// Downstream clients' parameters (or node metadata) select
		// variants upstream, never the relay's own node.
		Locators: true,
		// Every authority goes to the relay's upstreams unless the
		// bootstrap maps it elsewhere.
		AnyAuthority: true,
		// The relay says "does not exist" only when its upstream does
		// (unless told to time out, in o.Client).
		NeverTimeOut: o.Client.DoesNotExistTimeout == 0,
		Subscribed: func(s db.Sub, cached bool) {
			t := protocol.TypeLabel(resource.ForURL(s.Type))
			if cached {
				r.hits.WithLabelValues(t).Inc()
			} else {
				r.misses.WithLabelValues(t).Inc()
			}
		},
		// A proxy may not serve a do_not_cache copy to a new subscriber;
		// a SotW full state waits a while for names upstream has not
		// answered.
		HonorDoNotCache: true,
		PendingWait:     o.pendingWait,
		// Downstreams that come and go find the cache warm.
		Linger: o.CacheLinger,
		Lingering: func(n int, revived bool) {
			r.lingering.Set(float64(n))
			if revived {
				r.revived.Inc()
			}
		},
	}
}

// Register registers every xDS service on g.
func (r *Relay) Register(g *grpc.Server) { r.proto.Register(g) }

// Close ends the downstream streams and the upstream ones.
func (r *Relay) Close() {
	r.proto.Close()
	r.client.Close()
}

// clients reports the downstream streams, for cmd/xdsd's admin API
// (through rolehook).
func (r *Relay) clients() []protocol.Client { return r.proto.Clients() }

func init() {
	rolehook.RelayClients = func(r any) []protocol.Client { return r.(*Relay).clients() }
	rolehook.RelayProtocol = func(r any) *protocol.Server { return r.(*Relay).proto }
	rolehook.RelayGuard = func(o any, g protocol.Guard) any {
		ro := o.(Options)
		ro.guard = g
		return ro
	}
}

// Upstreams reports the upstream streams.
func (r *Relay) Upstreams() []client.Upstream { return r.client.Upstreams() }

// Resources lists what the cache holds, for the admin API.
func (r *Relay) Resources(context.Context) (int64, []*resource.Variant, error) {
	var (
		rev int64
		out []*resource.Variant
	)
	r.cache.Read(func(rd *db.Reader) {
		rev = rd.Rev()
		rd.Everything(func(v *resource.Variant) { out = append(out, v) })
	})
	return rev, out, nil
}

// upstreamCollector reports upstream subscriptions and connection state.
type upstreamCollector struct{ c *client.Client }

var (
	upSubsDesc = prometheus.NewDesc("xdsd_relay_upstream_subscriptions", "Subscriptions held upstream, by upstream.", []string{"upstream"}, nil)
	upConnDesc = prometheus.NewDesc("xdsd_relay_upstream_connected", "1 when the upstream stream is up, by upstream and the server it is on.", []string{"upstream", "server"}, nil)
)

func (u *upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upSubsDesc
	ch <- upConnDesc
}

// Collect reports one series per upstream, named by its server list. Two
// upstream streams with the same servers (authorities configured alike
// but for their features or transport) are summed (subscriptions) or
// merged (connected), so that no series is reported twice, which would
// fail the whole scrape.
func (u *upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	subs := map[string]int{}
	conn := map[[2]string]bool{}
	for _, up := range u.c.Upstreams() {
		name := strings.Join(up.Servers, ",")
		subs[name] += up.Subscriptions
		k := [2]string{name, up.Connected}
		conn[k] = conn[k] || up.Connected != ""
	}
	for name, n := range subs {
		ch <- prometheus.MustNewConstMetric(upSubsDesc, prometheus.GaugeValue, float64(n), name)
	}
	for k, up := range conn {
		v := 0.0
		if up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(upConnDesc, prometheus.GaugeValue, v, k[0], k[1])
	}
}
