package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/relay"
	"github.com/xdsd/xdsd/resource"
)

// relayUnderTest is a relay on loopback, and a client connection to it.
type relayUnderTest struct {
	r    *relay.Relay
	reg  *prometheus.Registry
	addr string
	conn *grpc.ClientConn
}

// awaitOutage waits until the relay has noticed its upstream is gone: no
// upstream stream of it is healthy any more.
func (rl *relayUnderTest) awaitOutage(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, "the relay to notice the outage", func() bool {
		for _, u := range rl.r.Upstreams() {
			if u.Connected != "" {
				return false
			}
		}
		return true
	})
}

func startRelay(t *testing.T, upstream string, sotw bool) *relayUnderTest {
	t.Helper()
	return startRelayLinger(t, upstream, sotw, 0)
}

// startRelayLinger starts a relay with Options.CacheLinger set.
func startRelayLinger(t *testing.T, upstream string, sotw bool, linger time.Duration) *relayUnderTest {
	t.Helper()
	tr := "delta"
	if sotw {
		tr = "sotw"
	}
	js, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{"server_uri": upstream, "channel_creds": []any{map[string]any{"type": "insecure"}}, "transport": tr}},
		"node":        map[string]any{"id": "relay"},
	})
	b, err := client.ParseBootstrap(js)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := relay.New(b, relay.WithPendingWait(relay.Options{Logger: testorigin.Quiet, Registerer: reg, CacheLinger: linger,
		Client: client.Options{BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}}, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close) // after the server's cleanup: streams first, then the relay
	addr, conn := protocoltest.Serve(t, r.Register)
	return &relayUnderTest{r: r, reg: reg, addr: addr, conn: conn}
}

func clusterDoc(name, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: %q\nalt_stat_name: %q\n", name, tag)
}

func routeVariant(cons, tag string) string {
	return fmt.Sprintf("name: r\nconstraints: %s\nresource:\n  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  virtual_hosts: [{name: %s, domains: [\"*\"]}]\n", cons, tag)
}

func loc(n string, kv ...string) *discoveryv3.ResourceLocator {
	l := &discoveryv3.ResourceLocator{Name: n, DynamicParameters: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		l.DynamicParameters[kv[i]] = kv[i+1]
	}
	return l
}

// upstreamStreams counts the origin's streams.
func upstreamStreams(o *testorigin.Origin) int { return len(o.Srv.Streams()) }

// 100 downstream streams with identical subscriptions make exactly one
// upstream subscription, read from the origin's clients.
func TestOneUpstreamSubscriptionForMany(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "1"))
	rl := startRelay(t, o.Addr, false)
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				d := protocoltest.NewDelta(t, rl.conn, protocoltest.Node(fmt.Sprint("d", i), nil))
				d.Sub(resource.ClusterURL, "c")
				if got := protocoltest.Describe(d.Recv()); got != "cluster.v3.Cluster: c" {
					t.Errorf("delta stream %d: %s", i, got)
				}
				return
			}
			s := protocoltest.NewSotW(t, rl.conn, protocoltest.Node(fmt.Sprint("s", i), nil))
			s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
			if got := protocoltest.SotWNames(t, s.Recv()); len(got) != 1 || got[0] != "c" {
				t.Errorf("sotw stream %d: %v", i, got)
			}
		}()
	}
	wg.Wait()
	if got := o.Subscriptions("c"); got != 1 {
		t.Errorf("origin holds %d subscriptions to c, want 1", got)
	}
	if got := upstreamStreams(o); got != 1 {
		t.Errorf("origin serves %d streams, want 1", got)
	}
	if got := len(rl.r.Streams()); got != n {
		t.Errorf("relay serves %d downstream streams, want %d", got, n)
	}
	// A subscription is counted (db.Hooks.Subscribed) after it is in the
	// db, where the upstream's answer may reach it first: a stream can
	// have its response before its hit or miss is counted. So the count
	// is waited for, then checked.
	var hits, misses float64
	counted := func() bool {
		hits = promtest.ToFloat64(relayCounter(t, rl, "xdsd_relay_cache_hits_total"))
		misses = promtest.ToFloat64(relayCounter(t, rl, "xdsd_relay_cache_misses_total"))
		return hits+misses >= n
	}
	testutil.Eventually(t, fmt.Sprintf("%d subscriptions counted as cache hits or misses", n), counted)
	if hits+misses != n || misses < 1 {
		t.Errorf("cache hits %v misses %v", hits, misses)
	}
}

func relayCounter(t *testing.T, rl *relayUnderTest, name string) prometheus.Collector {
	t.Helper()
	mfs, err := rl.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
	c.Add(sum)
	return c
}

// Two parameter sets make two upstream subscriptions; each downstream gets
// its own variant, with its constraints (TP2: proxies MUST send them); a
// legacy client's node metadata counts as its parameters.
func TestVariantsPerParameterSet(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeVariant("env=prod", "prod") + "---\n" + routeVariant("env=test", "test"))
	rl := startRelay(t, o.Addr, false)
	prod := protocoltest.NewDelta(t, rl.conn, nil)
	prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	if got := protocoltest.Describe(prod.Recv()); got != "route.v3.RouteConfiguration: r [env=prod]" {
		t.Fatalf("prod: %s", got)
	}
	test := protocoltest.NewDelta(t, rl.conn, nil)
	test.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
	if got := protocoltest.Describe(test.Recv()); got != "route.v3.RouteConfiguration: r [env=test]" {
		t.Fatalf("test: %s", got)
	}
	legacy := protocoltest.NewSotW(t, rl.conn, protocoltest.Node("legacy", map[string]string{"env": "prod"}))
	legacy.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := legacy.Recv()
	if len(r.Resources) != 1 || !strings.Contains(string(r.Resources[0].Value), "prod") {
		t.Fatalf("legacy client got %v", protocoltest.SotWNames(t, r))
	}
	if got := o.Subscriptions("r"); got != 2 {
		t.Errorf("origin holds %d subscriptions to r, want 2 (one per parameter set)", got)
	}
}

// The origin goes away: the relay keeps serving its cache to existing and
// new downstream clients, and nobody sees a removal; when it is back,
// changes flow again.
func TestServesThroughOutage(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply(clusterDoc("c", "1"))
			rl := startRelay(t, o.Addr, sotw)
			old := protocoltest.NewDelta(t, rl.conn, nil)
			old.Sub(resource.ClusterURL, "c")
			old.Ack(old.Recv())
			oldWildcard := protocoltest.NewSotW(t, rl.conn, nil)
			oldWildcard.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
			oldWildcard.Ack(oldWildcard.Recv())
			o.Stop()
			fresh := protocoltest.NewDelta(t, rl.conn, nil)
			fresh.Sub(resource.ClusterURL, "c")
			if got := protocoltest.Describe(fresh.Recv()); got != "cluster.v3.Cluster: c" {
				t.Fatalf("new client during the outage: %s", got)
			}
			// A wildcard another client had asked for is known too.
			legacy := protocoltest.NewSotW(t, rl.conn, nil)
			legacy.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
			if got := protocoltest.SotWNames(t, legacy.Recv()); len(got) != 1 {
				t.Fatalf("new wildcard client during the outage: %v", got)
			}
			o.Apply(clusterDoc("c", "2")) // changed while the origin is down
			o.Start()
			// The first thing anyone hears after the outage is the change:
			// a removal would have come first.
			for _, d := range []*protocoltest.Delta{old, fresh} {
				r := d.Recv()
				if got := protocoltest.Describe(r); got != "cluster.v3.Cluster: c" || len(r.Resources) != 1 || r.Resources[0].Version != "2" {
					t.Fatalf("after the outage: %s (version %v)", got, r.Resources)
				}
			}
			o.Apply(clusterDoc("c", "3"))
			if r := old.Recv(); r.Resources[0].Version != "3" {
				t.Fatalf("changes stopped flowing: %s", protocoltest.Describe(r))
			}
		})
	}
}

// A relay can be the upstream of another relay; constraints survive the
// chain.
func TestChainOfRelays(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeVariant("env=prod", "prod") + "---\n" + routeVariant("env=test", "test"))
	first := startRelay(t, o.Addr, false)
	second := startRelay(t, first.addr, false)
	d := protocoltest.NewDelta(t, second.conn, nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
	r := d.Recv()
	if got := protocoltest.Describe(r); got != "route.v3.RouteConfiguration: r [env=test]" {
		t.Fatalf("through two relays: %s", got)
	}
	if r.Resources[0].Version != store.Version(1, constraint.MustParse("env=test").Key()) {
		t.Errorf("version changed along the chain: %s", r.Resources[0].Version)
	}
	o.Apply(routeVariant("env=prod", "prod2") + "---\n" + routeVariant("env=test", "test2"))
	if got := protocoltest.Describe(d.Recv()); got != "route.v3.RouteConfiguration: r [env=test]" {
		t.Fatalf("update through two relays: %s", got)
	}
}

// cache_control.do_not_cache: a relay does not answer a new subscription
// from such a copy; it fetches it again. An ordinary resource is answered
// from the cache.
func TestDoNotCache(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply("do_not_cache: true\nresource:\n  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  name: private\n---\n" +
				"\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: shared\n")
			rl := startRelay(t, o.Addr, sotw)
			fetched := func() int64 {
				var n int64
				for _, u := range rl.r.Upstreams() {
					n += u.Resources
				}
				return n
			}
			for i, want := range []int64{2, 3} {
				d := protocoltest.NewDelta(t, rl.conn, nil)
				d.Sub(resource.RouteURL, "private", "shared")
				// The fresh copy may come in a response of its own.
				got := map[string]bool{}
				for len(got) < 2 {
					r := d.Recv()
					if len(r.RemovedResources)+len(r.RemovedResourceNames) > 0 {
						t.Fatalf("subscriber %d told of a removal: %s", i, protocoltest.Describe(r))
					}
					for _, res := range r.Resources {
						if got[res.Name] {
							t.Fatalf("subscriber %d got %s twice", i, res.Name)
						}
						got[res.Name] = true
						if res.Name == "private" && !res.GetCacheControl().GetDoNotCache() {
							t.Errorf("do_not_cache not passed on")
						}
					}
				}
				if got := fetched(); got != want {
					t.Errorf("subscriber %d: %d resources fetched upstream, want %d", i, got, want)
				}
			}
		})
	}
}

// A relay federating two authorities (here on one origin, configured with
// different server features, so on two upstream streams) serves both, and
// its metrics report each upstream once: two series with the same labels
// would fail every scrape.
func TestFederatedUpstreamsAndTheirMetrics(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "1") + "---\n" + clusterDoc("xdstp://a/envoy.config.cluster.v3.Cluster/c", "1"))
	js := fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}]}],"node":{"id":"relay"},
	"authorities":{"a":{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}],"server_features":["ignore_resource_deletion"]}]}}}`, o.Addr, o.Addr)
	b, err := client.ParseBootstrap([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := relay.New(b, relay.Options{Logger: testorigin.Quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	_, conn := protocoltest.Serve(t, r.Register)
	d := protocoltest.NewDelta(t, conn, nil)
	d.Sub(resource.ClusterURL, "c", "xdstp://a/envoy.config.cluster.v3.Cluster/c")
	got := map[string]bool{}
	for len(got) < 2 {
		r := d.Recv()
		for _, res := range r.Resources {
			got[res.Name] = true
		}
		d.Ack(r)
	}
	if n := len(r.Upstreams()); n != 2 {
		t.Fatalf("%d upstream streams, want 2 (one per authority's server list and features)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "xdsd_relay_upstream_subscriptions" {
			if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 2 {
				t.Errorf("upstream subscriptions: %v", mf.GetMetric())
			}
		}
	}
}

// TP2 "Best Practices": with no variant for a client's parameters, the
// resource does not exist for it — also through a relay that holds the
// name for other parameters (it must not wait for an answer that the
// origin gives only by variant).
func TestNoVariantForOneParameterSet(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply(routeVariant("env=prod", "prod") + "---\nname: c\nconstraints: env=prod\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n---\n" + clusterDoc("d", "1"))
			rl := startRelay(t, o.Addr, sotw)
			prod := protocoltest.NewDelta(t, rl.conn, nil)
			prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			if got := protocoltest.Describe(prod.Recv()); got != "route.v3.RouteConfiguration: r [env=prod]" {
				t.Fatalf("env=prod: %s", got)
			}
			if !sotw {
				// (A SotW upstream has no way to say a route does not exist:
				// docs/protocol.md §1.8. Clients time out on their own.)
				qa := protocoltest.NewDelta(t, rl.conn, nil)
				qa.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "qa")}})
				if got := protocoltest.Describe(qa.Recv()); got != "route.v3.RouteConfiguration: -r" {
					t.Fatalf("env=qa: %s", got)
				}
			}
			// A legacy SotW client whose metadata matches no variant of c
			// gets the full state without it — not no state at all.
			p := protocoltest.NewSotW(t, rl.conn, protocoltest.Node("p", map[string]string{"env": "prod"}))
			p.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "d"}})
			if got := protocoltest.SotWNames(t, p.Recv()); len(got) != 2 {
				t.Fatalf("env=prod clusters: %v", got)
			}
			q := protocoltest.NewSotW(t, rl.conn, protocoltest.Node("q", map[string]string{"env": "qa"}))
			q.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "d"}})
			if got := protocoltest.SotWNames(t, q.Recv()); len(got) != 1 || got[0] != "d" {
				t.Fatalf("env=qa clusters: %v", got)
			}
		})
	}
}

// A client restarted during an outage is served from the cache even if it
// was the last subscriber of what it asks for; what nobody asks for again
// is dropped once the upstream is back.
func TestCacheOutlivesItsLastSubscriberDuringAnOutage(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "1") + "---\n" + clusterDoc("x", "1") + "---\n" + clusterDoc("y", "1"))
	rl := startRelay(t, o.Addr, false)
	a := protocoltest.NewDelta(t, rl.conn, nil)
	a.Sub(resource.ClusterURL, "c", "x", "y")
	for n := 0; n < 3; {
		r := a.Recv()
		n += len(r.Resources)
		a.Ack(r)
	}
	o.Stop()
	rl.awaitOutage(t)
	// The client lets go of c and x — their last subscriber — and asks for
	// c again: one stream's requests are taken in order, and a new
	// subscription is always answered (§2.2), here from the cache.
	a.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"c", "x"}})
	a.Sub(resource.ClusterURL, "c")
	r := a.Recv()
	if got := protocoltest.Describe(r); got != "cluster.v3.Cluster: c" {
		t.Fatalf("c asked for again during the outage: %s", got)
	}
	a.Ack(r)
	// Back: x, which nobody asked for again, leaves the cache (the first
	// response after the reconnection proves the upstream healthy, and
	// the relay lets go of it before applying the response).
	o.Apply(clusterDoc("y", "2"))
	o.Start()
	for {
		r := a.Recv()
		a.Ack(r)
		if len(r.Resources) == 1 && r.Resources[0].Name == "y" && strings.Contains(r.Resources[0].Resource.String(), "2") {
			break
		}
	}
	_, vs, err := rl.r.Resources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	if fmt.Sprint(names) != "[c y]" {
		t.Errorf("cached after the outage: %v, want [c y]", names)
	}
}

// do_not_cache in a SotW full state: a new subscriber's first CDS state
// waits for the fresh copy of the cluster it may not be served from the
// cache — without it, the state would say the cluster does not exist —
// and the subscriber before it sees no state without the cluster.
func TestDoNotCacheInAFullState(t *testing.T) {
	for _, sotwUp := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotwUp), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply("do_not_cache: true\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n---\n" + clusterDoc("d", "1"))
			rl := startRelay(t, o.Addr, sotwUp)
			s1 := protocoltest.NewSotW(t, rl.conn, nil)
			s1.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "d"}})
			r := s1.Recv()
			if got := protocoltest.SotWNames(t, r); len(got) != 2 {
				t.Fatalf("first subscriber: %v", got)
			}
			s1.Ack(r, "c", "d")
			s2 := protocoltest.NewSotW(t, rl.conn, nil)
			s2.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "d"}})
			r = s2.Recv()
			if got := protocoltest.SotWNames(t, r); len(got) != 2 {
				t.Fatalf("second subscriber's first state: %v", got)
			}
			s2.Ack(r, "c", "d")
			// Whatever the first subscriber is sent meanwhile holds c. A
			// barrier: a secret applied now and asked for by s1 comes to s1
			// after any state the refetch of c upstream causes (the relay
			// asked for c again before it, and sends clusters before
			// secrets).
			o.Apply("\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: barrier\n")
			s1.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretURL, ResourceNames: []string{"barrier"}})
			for r := s1.Recv(); r.TypeUrl != resource.SecretURL; r = s1.Recv() {
				if got := protocoltest.SotWNames(t, r); len(got) != 2 {
					t.Fatalf("first subscriber got a state without c: %v", got)
				}
				s1.Ack(r, "c", "d")
			}
		})
	}
}

// TTLs pass through a relay (docs/protocol.md §2.7): the relay renews them
// downstream while its upstream renews them, and when the upstream goes,
// they expire at the relay and are removed below — the one removal an
// outage causes, because the resource's author asked for it.
func TestTTLThroughARelay(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply("ttl: 400ms\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n")
	rl := startRelay(t, o.Addr, false)
	d := protocoltest.NewDelta(t, rl.conn, protocoltest.Node("ttl", nil, "xds.config.supports-resource-ttl"))
	d.Sub(resource.ClusterURL, "c")
	r := d.Recv()
	if len(r.Resources) != 1 || r.Resources[0].GetTtl().AsDuration() != 400*time.Millisecond {
		t.Fatalf("through the relay: %v", r)
	}
	d.Ack(r)
	if hb := d.Recv(); len(hb.Resources) != 1 || hb.Resources[0].Resource != nil {
		t.Fatalf("want a heartbeat, got %s", protocoltest.Describe(hb))
	} else {
		d.Ack(hb)
	}
	o.Stop()
	for {
		r := d.Recv()
		d.Ack(r)
		if len(r.Resources) == 1 && r.Resources[0].Resource == nil {
			continue // heartbeats until the relay's copy expires
		}
		if got := protocoltest.Describe(r); got != "cluster.v3.Cluster: -c" {
			t.Fatalf("after the upstream went: %s", got)
		}
		break
	}
}
