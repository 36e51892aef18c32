// Package relayrole is the relay role's engine: the client filling a cache
// from upstream streams under the relay's cache policy, and the protocol
// engine serving it downstream (docs/architecture.md §2). The public relay
// package is its face for Go programs; cmd/xdsd uses it directly, with
// what only the binary sets or reads — the downstream access policy
// (--policy) and the downstream streams in the admin API's shape — as
// plain fields and methods of internal types.
//
// What makes the cache a relay's is one value, the relay's cache policy
// (Relay.policy): subscribe upstream by TP2 locator so that downstream
// parameters select variants, route every authority upstream, say "does
// not exist" only when the upstream does, honor do_not_cache, and bound
// how long a SotW full state waits for the upstream. The relay hands it to
// both the client and the protocol engine. It must not import server.
package relayrole

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/clientcore"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

// Options configure a Relay: relay.Options (whose fields say what each
// does), and what only cmd/xdsd sets.
type Options struct {
	Client           clientdata.Options
	MaxSubscriptions int
	// MaxSubscriptionBytes and MaxConnSubscriptionBytes are
	// protocol.Options' (zero: its defaults).
	MaxSubscriptionBytes, MaxConnSubscriptionBytes int64
	RequestRate                                    float64
	RequestBurst                                   int
	Logger                                         *slog.Logger
	Registerer                                     prometheus.Registerer
	CacheLinger                                    time.Duration

	// PendingWait is Policy.PendingWait (zero: 5s); tests shorten it.
	PendingWait time.Duration
	// Guard is the downstream access policy (xdsd relay --policy).
	Guard protocol.Guard
}

// Relay serves downstream xDS streams from a cache of its upstreams.
type Relay struct {
	client *clientcore.Client
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
func New(b *clientdata.Bootstrap, o Options) (*Relay, error) {
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
	c, err := clientcore.New(b, co, p)
	if err != nil {
		return nil, err
	}
	r.client, r.cache = c, c.DB()
	po := protocol.Options{MaxSubscriptions: o.MaxSubscriptions, MaxSubscriptionBytes: o.MaxSubscriptionBytes,
		MaxConnSubscriptionBytes: o.MaxConnSubscriptionBytes, RequestRate: o.RequestRate, RequestBurst: o.RequestBurst,
		Logger: o.Logger, Registerer: o.Registerer, Guard: o.Guard}
	r.proto = protocol.NewCacheServer(r.cache, po, p)
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
		PendingWait:     o.PendingWait,
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

// Streams reports the downstream streams, as the admin API shows them.
func (r *Relay) Streams() []protocol.StreamStatus { return r.proto.Streams() }

// Protocol is the downstream engine, which holds the fleet index of the
// clients behind the relay.
func (r *Relay) Protocol() *protocol.Server { return r.proto }

// Upstreams reports the upstream streams.
func (r *Relay) Upstreams() []clientdata.Upstream { return r.client.Upstreams() }

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
type upstreamCollector struct{ c *clientcore.Client }

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
