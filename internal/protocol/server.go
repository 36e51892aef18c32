package protocol

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	extensionservice "github.com/envoyproxy/go-control-plane/envoy/service/extension/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	runtimeservice "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	statusservice "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/inflight"
	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/tuning"
	"github.com/xdsd/xdsd/resource"
)

// Options bound what one stream may cost (docs/architecture.md §6).
type Options struct {
	// MaxSubscriptions per stream (all types together). Default 100000.
	MaxSubscriptions int
	// MaxSubscriptionBytes bounds the memory of one stream's subscription
	// state (its subscriptions and the resource versions it declared), in
	// bytes as subbytes.go estimates them. Default 128 MiB, which holds
	// MaxSubscriptions' default of names up to about 60 bytes.
	MaxSubscriptionBytes int64
	// MaxConnSubscriptionBytes bounds the same for all the streams of one
	// connection together, so that opening streams does not multiply it.
	// It is per connection, not per identity: every client without a
	// certificate has the identity "". Default 256 MiB.
	MaxConnSubscriptionBytes int64
	// RequestRate is the sustained requests per second a stream may send,
	// RequestBurst the burst above it. Defaults 100/s and 1000.
	RequestRate  float64
	RequestBurst int
	// CacheBytes bounds the shared response encodings. Default 64 MiB.
	CacheBytes int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (none when nil).
	Registerer prometheus.Registerer
	// Guard, when set, is the authorization policy streams are held to
	// (guard.go).
	Guard Guard
	// Replica names this process among the replicas that share a store
	// (etcd); it is reported with each client. "" for a lone server.
	Replica string
}

// Server serves a db over every xDS gRPC service.
type Server struct {
	db      *db.DB
	opts    Options
	policy  cachepolicy.Policy // a cache's rules (a relay's); zero for a server
	log     *slog.Logger
	cache   *bodyCache
	memo    memo
	sets    watchSets
	metrics *metrics
	sendq   sendPool // sends of single-goroutine streams
	fleet   *fleet.Index
	replica atomic.Pointer[string] // SetReplica's name

	ids     atomic.Uint64
	mu      sync.Mutex
	streams map[uint64]*stream
	conns   map[string]*connBudget // by connKey: one per connection
	closed  bool
}

// NewServer returns a server of d's contents.
func NewServer(d *db.DB, o Options) *Server { return NewCacheServer(d, o, cachepolicy.Policy{}) }

// NewCacheServer returns a server of a cache, d, under the cache's policy
// (its downstream rules: do_not_cache, how long a SotW full state waits
// for the upstream).
func NewCacheServer(d *db.DB, o Options, p cachepolicy.Policy) *Server {
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 100000
	}
	if p.PendingWait <= 0 {
		p.PendingWait = 5 * time.Second
	}
	if o.RequestRate <= 0 {
		o.RequestRate = 100
	}
	if o.RequestBurst <= 0 {
		o.RequestBurst = 1000
	}
	if o.MaxSubscriptionBytes <= 0 {
		o.MaxSubscriptionBytes = 128 << 20
	}
	if o.MaxConnSubscriptionBytes <= 0 {
		o.MaxConnSubscriptionBytes = 256 << 20
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Server{db: d, opts: o, policy: p, log: o.Logger, cache: newBodyCache(o.CacheBytes), sendq: sendPool{base: max(1, tuning.SendWorkers())},
		metrics: newMetrics(o.Registerer), streams: map[uint64]*stream{}, conns: map[string]*connBudget{}, fleet: fleet.NewIndex()}
}

// Register registers the ADS service (SotW and delta) and the per-type
// Stream/Delta services, and CSDS (the server's view of every connected
// client, see csds.go), on g. g must be created with ServerCodec().
func (s *Server) Register(g *grpc.Server) {
	type svc struct {
		desc  grpc.ServiceDesc
		types map[string]string // method → type URL ("" for ADS)
	}
	services := []svc{
		{discoveryv3.AggregatedDiscoveryService_ServiceDesc, map[string]string{"StreamAggregatedResources": "", "DeltaAggregatedResources": ""}},
		{listenerservice.ListenerDiscoveryService_ServiceDesc, map[string]string{"StreamListeners": resource.ListenerURL, "DeltaListeners": resource.ListenerURL}},
		{routeservice.RouteDiscoveryService_ServiceDesc, map[string]string{"StreamRoutes": resource.RouteURL, "DeltaRoutes": resource.RouteURL}},
		{routeservice.ScopedRoutesDiscoveryService_ServiceDesc, map[string]string{"StreamScopedRoutes": resource.ScopedRouteURL, "DeltaScopedRoutes": resource.ScopedRouteURL}},
		{routeservice.VirtualHostDiscoveryService_ServiceDesc, map[string]string{"DeltaVirtualHosts": resource.VirtualHostURL}},
		{clusterservice.ClusterDiscoveryService_ServiceDesc, map[string]string{"StreamClusters": resource.ClusterURL, "DeltaClusters": resource.ClusterURL}},
		{endpointservice.EndpointDiscoveryService_ServiceDesc, map[string]string{"StreamEndpoints": resource.EndpointURL, "DeltaEndpoints": resource.EndpointURL}},
		{endpointservice.LocalityEndpointDiscoveryService_ServiceDesc, map[string]string{"DeltaLocalityEndpoints": resource.LbEndpointURL}},
		{secretservice.SecretDiscoveryService_ServiceDesc, map[string]string{"StreamSecrets": resource.SecretURL, "DeltaSecrets": resource.SecretURL}},
		{runtimeservice.RuntimeDiscoveryService_ServiceDesc, map[string]string{"StreamRuntime": resource.RuntimeURL, "DeltaRuntime": resource.RuntimeURL}},
		{extensionservice.ExtensionConfigDiscoveryService_ServiceDesc, map[string]string{"StreamExtensionConfigs": resource.ExtensionConfigURL, "DeltaExtensionConfigs": resource.ExtensionConfigURL}},
	}
	for _, sv := range services {
		// The generated descriptors name the methods; the handlers are
		// ours, so responses can go out pre-encoded.
		desc := grpc.ServiceDesc{ServiceName: sv.desc.ServiceName, HandlerType: (*any)(nil), Metadata: sv.desc.Metadata}
		for _, st := range sv.desc.Streams {
			typeURL, ok := sv.types[st.StreamName]
			if !ok {
				continue
			}
			delta := len(st.StreamName) > 5 && st.StreamName[:5] == "Delta"
			desc.Streams = append(desc.Streams, grpc.StreamDesc{
				StreamName:    st.StreamName,
				ServerStreams: true,
				ClientStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error {
					return s.Serve(ss, delta, typeURL)
				},
			})
		}
		g.RegisterService(&desc, s)
	}
	statusservice.RegisterClientStatusDiscoveryServiceServer(g, csds{s})
}

// Serve runs one stream: delta or SotW, for one type (a per-type service)
// or any (ADS, typeURL ""). It returns when the stream ends.
func (s *Server) Serve(ss grpc.ServerStream, delta bool, typeURL string) error {
	ctx := ss.Context()
	stop := streamStop(ctx)
	cancel := stop
	if stop == nil {
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	st := &stream{cancel: cancel,
		srv: s, ss: ss, delta: delta, fixedType: typeURL,
		id: s.ids.Add(1), addr: peerAddr(ctx), identity: mtls.FromContext(ctx), started: time.Now(),
		types: map[string]*typeState{},
	}
	initLimiter(&st.limiter, s.opts.RequestRate, s.opts.RequestBurst)
	if stop == nil {
		st.wake = make(chan struct{}, 1)
	}
	if s.opts.Guard != nil {
		// A client that never sends a node still subscribes with what the
		// policy assigns it.
		st.assigned = s.opts.Guard.Assigned(st.identity)
		st.nodeParams = st.withAssigned(nil)
	}
	st.sub = db.NewSubscriber(st.signal)
	st.sub.Owner = st
	// The agent, from the gRPC header until the node says more (begin).
	st.member = &fleet.Member{Owner: st, Agent: fleet.AgentOf("", userAgent(ctx))}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "server shutting down")
	}
	s.streams[st.id] = st
	ck := connKey(ctx)
	cb := s.conns[ck]
	if cb == nil {
		cb = &connBudget{reqs: inflight.ForContext(ctx)}
		s.conns[ck] = cb
	}
	cb.streams++
	st.conn = cb
	s.mu.Unlock()
	s.metrics.streams.WithLabelValues(st.kind()).Inc()
	defer func() {
		st.mu.Lock()
		cb.bytes.Add(-st.subBytes)
		st.mu.Unlock()
		s.mu.Lock()
		delete(s.streams, st.id)
		if cb.streams--; cb.streams == 0 {
			delete(s.conns, ck)
		}
		last := len(s.streams) == 0
		s.mu.Unlock()
		if last {
			// Nothing shared is of use to anyone now: let it go.
			s.memo.clear()
			s.cache.clear()
		}
		s.metrics.streams.WithLabelValues(st.kind()).Dec()
	}()
	err := st.run(ctx, stop)
	if st.closing.Load() {
		return status.Error(codes.Unavailable, "server shutting down")
	}
	st.mu.Lock()
	n := st.node
	st.mu.Unlock()
	if n != nil {
		s.log.Info("client disconnected", "stream", st.id, "node", truncate(n.GetId(), maxLoggedText), "address", st.addr,
			"connected_for", time.Since(st.started).Round(time.Millisecond), "error", err)
	} else if err != nil {
		s.log.Debug("stream ended", "stream", st.id, "error", err)
	}
	return err
}

// SetReplica names this server among the replicas that share a store
// (known once its admin API is bound); it is reported with each client.
func (s *Server) SetReplica(name string) { s.replica.Store(&name) }

func (s *Server) replicaName() string {
	if p := s.replica.Load(); p != nil {
		return *p
	}
	return s.opts.Replica
}

// userAgent is the gRPC user-agent header of a stream ("grpc-go/1.70.0").
func userAgent(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("user-agent"); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Close ends every stream, so clients reconnect (to another server) at
// once, and refuses new ones. A stream ends with UNAVAILABLE, or, on a gRPC
// server made with ServerOptions, with CANCELLED: gRPC writes that status
// itself when it ends the read Close interrupts (xDS clients, Envoy's and
// gRPC's, retry a stream whatever its status). A gRPC server's graceful
// stop would otherwise wait for xDS streams, which never end on their own.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		st.closing.Store(true)
		st.cancel()
	}
}

// initLimiter makes l, a zero rate.Limiter, the token bucket bounding a
// stream's request rate: ratePerSec requests a second sustained, burst at
// once. A client over its rate is slowed down (rate.Limiter.Wait: its
// requests wait), never dropped. The limiter lives in the stream's struct,
// not behind rate.NewLimiter's pointer, which would cost each stream a
// second allocation. A zero Limiter starts empty; one second at an
// infinite rate fills it to its burst, as NewLimiter's starts.
func initLimiter(l *rate.Limiter, ratePerSec float64, burst int) {
	now := time.Now()
	l.SetBurstAt(now.Add(-time.Second), burst)
	l.SetLimitAt(now.Add(-time.Second), rate.Inf)
	l.SetLimitAt(now, rate.Limit(ratePerSec))
}

type metrics struct {
	streams   *prometheus.GaugeVec
	pushes    *prometheus.CounterVec
	resources *prometheus.CounterVec
	bytes     *prometheus.CounterVec
	acks      *prometheus.CounterVec
	nacks     *prometheus.CounterVec
	stale     *prometheus.CounterVec
	latency   prometheus.Histogram
	denied    *prometheus.CounterVec
	// subRefused counts requests refused for the bytes of subscription
	// state (subbytes.go), by the limit passed: "stream"
	// (MaxSubscriptionBytes) or "connection" (MaxConnSubscriptionBytes).
	subRefused *prometheus.CounterVec

	mu    sync.Mutex
	types map[string]*typeCounters
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		streams:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "xdsd_streams", Help: "Connected downstream xDS streams, by kind."}, []string{"kind"}),
		pushes:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_pushes_total", Help: "Responses sent, by resource type."}, []string{"type"}),
		resources: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_pushed_resources_total", Help: "Resources and removals sent, by resource type."}, []string{"type"}),
		bytes:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_pushed_bytes_total", Help: "Response bytes sent, by resource type."}, []string{"type"}),
		acks:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_acks_total", Help: "ACKs received, by resource type."}, []string{"type"}),
		nacks:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_nacks_total", Help: "NACKs received, by resource type."}, []string{"type"}),
		stale:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_stale_requests_total", Help: "SotW requests ignored for a stale nonce, by resource type."}, []string{"type"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "xdsd_apply_to_send_seconds",
			Help:    "Time from a change entering the database to a response carrying it being sent.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		denied: denyMetric(),
		subRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_subscription_bytes_refused_total",
			Help: "Requests refused with RESOURCE_EXHAUSTED, ending their stream, because their subscription state would pass a limit: stream (--max-subscription-bytes) or connection (--max-connection-subscription-bytes)."},
			[]string{"limit"}),
	}
	if r != nil {
		r.MustRegister(m.streams, m.pushes, m.resources, m.bytes, m.acks, m.nacks, m.stale, m.latency, m.denied, m.subRefused)
	}
	return m
}

// forType returns a type's request counters, shared by every stream.
func (m *metrics) forType(name string) *typeCounters {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.types[name]; c != nil {
		return c
	}
	c := &typeCounters{acks: m.acks.WithLabelValues(name), nacks: m.nacks.WithLabelValues(name), stale: m.stale.WithLabelValues(name),
		pushes: m.pushes.WithLabelValues(name), resources: m.resources.WithLabelValues(name), bytes: m.bytes.WithLabelValues(name)}
	if m.types == nil {
		m.types = map[string]*typeCounters{}
	}
	m.types[name] = c
	return c
}

func (m *metrics) sent(o *out) {
	o.counters.pushes.Inc()
	o.counters.resources.Add(float64(o.items))
	o.counters.bytes.Add(float64(len(o.enc.Body) + len(o.enc.Nonce)))
	if !o.since.IsZero() {
		m.latency.Observe(time.Since(o.since).Seconds())
	}
}

// StreamStatus is one connected stream as /v1/clients shows it.
type StreamStatus struct {
	ID     uint64 `json:"id"`
	NodeID string `json:"node_id"`
	// Identity is the URI SAN of the client's verified certificate.
	Identity string `json:"identity,omitempty"`
	Cluster  string `json:"node_cluster,omitempty"`
	Address  string `json:"address"`
	Kind     string `json:"kind"`
	// Agent is the client software (fleet.AgentOf): envoy, grpc-go…
	Agent string `json:"agent"`
	// Replica names the server replica the stream is connected to ("" for
	// a lone server).
	Replica   string            `json:"replica,omitempty"`
	Connected time.Time         `json:"connected"`
	Params    map[string]string `json:"node_params,omitempty"`
	Requests  int               `json:"requests"`
	Types     []TypeStatus      `json:"types"`
	// Node is the node the client sent, as it sent it.
	Node *corev3.Node `json:"-"`
}

// TypeStatus is a stream's state for one resource type.
type TypeStatus struct {
	Type          string         `json:"type"`
	URL           string         `json:"type_url"`
	Subscriptions []Subscription `json:"subscriptions"`
	Resources     int            `json:"resources"`
	SentVersion   string         `json:"sent_version"`
	SentNonce     string         `json:"sent_nonce"`
	SentAt        *time.Time     `json:"sent_at,omitempty"`
	AckedVersion  string         `json:"acked_version"`
	AckedNonce    string         `json:"acked_nonce"`
	AckedAt       *time.Time     `json:"acked_at,omitempty"`
	LastNack      *Nack          `json:"last_nack,omitempty"`
	Nacks         int            `json:"nacks"`
	// Held is what the stream holds (delta) or was last sent (SotW), by
	// name: which variant of each resource the client got.
	Held []Held `json:"held"`
}

// Held is one variant a stream holds, or a name it was told does not
// exist.
type Held struct {
	Name        string `json:"name"`
	Constraints string `json:"constraints,omitempty"` // text syntax
	Version     string `json:"version,omitempty"`
	Absent      bool   `json:"absent,omitempty"` // told it does not exist
	// Variant is the variant itself, when the stream has it (not one it
	// only declared on reconnection).
	Variant *resource.Variant `json:"-"`
}

// Subscription is one subscribed name with its dynamic parameters.
type Subscription struct {
	Name    string            `json:"name"`
	Params  map[string]string `json:"params,omitempty"`
	Locator bool              `json:"locator,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Streams reports every connected stream, in connection order.
func (s *Server) Streams() []StreamStatus {
	s.mu.Lock()
	streams := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	sort.Slice(streams, func(i, j int) bool { return streams[i].id < streams[j].id })
	out := make([]StreamStatus, 0, len(streams))
	for _, st := range streams {
		out = append(out, st.status())
	}
	return out
}

func (st *stream) status() StreamStatus {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.header()
	for _, ts := range st.types {
		t := ts.status(true)
		for _, w := range ts.ws.sorted {
			t.Subscriptions = append(t.Subscriptions, Subscription{Name: w.Name, Params: w.Params, Locator: w.Locator})
		}
		for n := range ts.held.m {
			t.Held = ts.appendHeld(t.Held, n)
		}
		sortHeld(t.Held)
		c.Types = append(c.Types, t)
	}
	sort.Slice(c.Types, func(i, j int) bool { return c.Types[i].Type < c.Types[j].Type })
	return c
}

// header is a stream's status without its types (st.mu held).
func (st *stream) header() StreamStatus {
	return StreamStatus{ID: st.id, NodeID: st.node.GetId(), Identity: st.identity, Cluster: st.node.GetCluster(), Address: st.addr,
		Kind: st.kind(), Agent: st.agent(), Replica: st.srv.replicaName(), Connected: st.started, Params: st.nodeParams, Requests: st.requests,
		Types: []TypeStatus{}, Node: st.node}
}

// status is a type's versions and answers, without subscriptions or what
// it holds; count says to count the resources it holds (the stream's lock
// held).
func (ts *typeState) status(count bool) TypeStatus {
	t := TypeStatus{Type: ts.typ.Name, URL: ts.typ.URL, Subscriptions: []Subscription{}, Held: []Held{}, SentVersion: ts.sentVersion, SentNonce: ts.nonce,
		SentAt: timePtr(ts.sentAt), AckedVersion: ts.ackVersion, AckedNonce: ts.ackNonce, AckedAt: timePtr(ts.ackAt),
		LastNack: ts.nack, Nacks: ts.nacks}
	if count {
		for _, h := range ts.held.m {
			t.Resources += len(h.variants)
		}
	}
	return t
}

// appendHeld adds what the stream holds of name n.
func (ts *typeState) appendHeld(out []Held, n string) []Held {
	h, ok := ts.held.m[n]
	if !ok {
		return out
	}
	if h.absent && len(h.variants) == 0 {
		out = append(out, Held{Name: n, Absent: true})
	}
	for _, hv := range h.variants {
		o := Held{Name: n, Version: hv.version, Variant: hv.v}
		if hv.v != nil {
			o.Constraints = hv.v.Constraints.String()
		}
		out = append(out, o)
	}
	return out
}

func sortHeld(hs []Held) {
	sort.Slice(hs, func(i, j int) bool {
		if hs[i].Name != hs[j].Name {
			return hs[i].Name < hs[j].Name
		}
		return hs[i].Constraints < hs[j].Constraints
	})
}

// agent is the stream's client software (s.mu held).
func (st *stream) agent() string {
	if st.member != nil {
		return st.member.Agent
	}
	return fleet.Other
}
