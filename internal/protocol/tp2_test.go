package protocol_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

func loc(n string, kv ...string) *discoveryv3.ResourceLocator {
	l := &discoveryv3.ResourceLocator{Name: n, DynamicParameters: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		l.DynamicParameters[kv[i]] = kv[i+1]
	}
	return l
}

func fourVariants() []*resource.Variant {
	return []*resource.Variant{
		route("r", "env!=prod && version!=v1", "default"),
		route("r", "env=prod && version!=v1", "prod"),
		route("r", "env!=prod && version=v1", "v1"),
		route("r", "env=prod && version=v1", "prod-v1"),
	}
}

// docs/protocol.md §4.2–4.3: resource_locators_subscribe carry dynamic
// parameters; the server answers with the matching variant named by
// resource_name with its constraints (TP2: servers MUST send them).
func TestTP2_4_2_DeltaLocators(t *testing.T) {
	h := newHarness(t)
	h.put(fourVariants()...)
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod", "version", "v2")}})
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r [env=prod && version!=v1]")

	// One stream may hold one name under several parameter sets (a relay):
	// each gets its variant, and identical ones are sent once.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{
		loc("r", "env", "test", "version", "v1"), loc("r", "env", "canary", "version", "v1")}})
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r [env!=prod && version=v1]")
}

// TP2 "Best Practices": with no variant for a client's parameters "the
// server act[s] as if the requested resource does not exist". When the same
// stream holds the name under other parameters (a relay), a plain removal
// would take those too, so the answer is a removal naming the variant the
// parameters would select — the class of parameter sets, over the keys the
// variants constrain, that agree with them.
func TestTP2_4_1_NoVariantForOneParameterSet(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "p"), route("r", "env=test", "t"))
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{
		loc("r", "env", "prod"), loc("r", "env", "qa", "zone", "z1")}})
	r := c.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [env=prod] -r [env=qa]")
	c.Ack(r)
	// Told once: a later change of the name does not repeat it.
	h.put(route("r", "env=prod", "p2"))
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r [env=prod]")
	// A parameter set without a key the variants constrain is told with
	// that key absent.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "zone", "z1")}})
	expect(t, c.Recv(), "route.v3.RouteConfiguration: -r [!exists(env)]")
	// When the variant appears, it is sent.
	h.put(route("r", "env=qa", "q"))
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r [env=qa]")
	// With no variant for anyone, the name is removed plainly.
	d := h.delta(nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("none", "env", "qa")}})
	expect(t, d.Recv(), "route.v3.RouteConfiguration: -none")
}

// TP2 "Transition Scenarios": replacing {env=prod} by {env=prod,version=v1}
// and {env=prod,version=v2} reaches each subscriber as one response, with
// the replaced variant in removed_resource_names.
func TestTP2_4_3_VariantReplacedInOneResponse(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "old"), route("r", "env=test", "t"))
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod", "version", "v1")}})
	r := c.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [env=prod]")
	c.Ack(r)
	h.update(db.Update{
		Puts: []*resource.Variant{route("r", "env=prod && version=v1", "p1"), route("r", "env=prod && version=v2", "p2"),
			route("r", "env=test && version=v1", "t"), route("r", "env=test && version=v2", "t")},
		Deletes: []resource.Key{{Type: resource.RouteURL, Name: "r", Constraints: "env=prod"}, {Type: resource.RouteURL, Name: "r", Constraints: "env=test"}},
	})
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r [env=prod && version=v1] -r [env=prod]")
	// Deleting the variant, with nothing else matching, removes it by name
	// and constraints.
	h.update(db.Update{Deletes: []resource.Key{{Type: resource.RouteURL, Name: "r", Constraints: constraint.MustParse("env=prod && version=v1").Key()}}})
	expect(t, c.Recv(), "route.v3.RouteConfiguration: -r [env=prod && version=v1]")
}

// docs/architecture.md §4.5: an unmodified client, sending plain names, gets the
// variant its node metadata matches; it is not sent constraints it cannot
// take.
func TestTP2_4_5_NodeMetadataFallback(t *testing.T) {
	h := newHarness(t)
	h.put(fourVariants()...)
	for _, tc := range []struct {
		meta map[string]string
		want string
	}{
		{map[string]string{"env": "prod", "version": "v1", "zone": "z"}, "prod-v1"},
		{map[string]string{"env": "test"}, "default"},
		{nil, "default"},
		{map[string]string{"version": "v1"}, "v1"},
	} {
		c := h.sotw(node("legacy", tc.meta))
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
		r := c.Recv()
		var rc routev3.RouteConfiguration
		if err := r.Resources[0].UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		if got := rc.VirtualHosts[0].Routes[0].GetRoute().GetCluster(); got != tc.want {
			t.Errorf("metadata %v: routed to %s, want %s", tc.meta, got, tc.want)
		}
		d := h.delta(node("legacy-delta", tc.meta))
		d.Sub(resource.RouteURL, "r")
		dr := d.Recv()
		if dr.Resources[0].Name != "r" || dr.Resources[0].ResourceName != nil {
			t.Errorf("legacy delta client got resource_name %v", dr.Resources[0].ResourceName)
		}
	}
}

// docs/protocol.md §4.3 (the gRPC draft): SotW resource_locators get resources
// wrapped in Resource with resource_name; names and locators mix freely.
func TestTP2_4_2_SotWLocators(t *testing.T) {
	h := newHarness(t)
	h.put(fourVariants()...)
	h.put(route("plain", "", "x"))
	c := h.sotw(node("n", map[string]string{"env": "prod"}))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"plain"},
		ResourceLocators: []*discoveryv3.ResourceLocator{loc("r", "env", "canary", "version", "v1")}})
	r := c.Recv()
	expectNames(t, r, resource.RouteURL, "plain", "r [env!=prod && version=v1]")
	wrapped := 0
	for _, a := range r.Resources {
		if a.TypeUrl == resource.WrapperURL {
			wrapped++
		}
	}
	if wrapped != 1 {
		t.Errorf("%d wrapped resources, want 1 (the locator's)", wrapped)
	}
}

func vhost(n string, domains ...string) *resource.Variant {
	ds := `"` + domains[0] + `"`
	for _, d := range domains[1:] {
		ds += `, "` + d + `"`
	}
	return variant(resource.VirtualHostURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.route.v3.VirtualHost", "name": %q, "domains": [%s]}`, n, ds))
}

// On-demand VHDS (docs/protocol.md §5): the namespace (wildcard) request gets
// the empty base set; "<rc>/<host>" resolves by domain and comes back named
// as the virtual host with the request in aliases; not found is a
// payload-less Resource named and aliased as requested; later updates go
// only to streams that know the virtual host.
func TestVHDS_5_OnDemand(t *testing.T) {
	h := newHarness(t)
	h.put(vhost("rc/web", "www.example.com", "*.web.example.com"), vhost("rc/api", "api.*"), vhost("rc/other", "other.com"))
	c := h.delta(nil)
	c.Sub(resource.VirtualHostURL)
	expect(t, c.Recv(), "route.v3.VirtualHost: ")
	c.Sub(resource.VirtualHostURL, "rc/www.example.com")
	r := c.Recv()
	expect(t, r, "route.v3.VirtualHost: rc/web aliases=rc/www.example.com")
	c.Ack(r)
	c.Sub(resource.VirtualHostURL, "rc/api.v2", "rc/nowhere.org")
	r = c.Recv()
	expect(t, r, "route.v3.VirtualHost: rc/api aliases=rc/api.v2 rc/nowhere.org (no payload) aliases=rc/nowhere.org")
	c.Ack(r)
	// An update to a known virtual host is pushed; to an unknown one, not.
	h.put(vhost("rc/other", "other.com", "more.com"))
	c.Barrier(h.putSecret)
	h.put(vhost("rc/web", "www.example.com", "*.web.example.com", "new.example.com"))
	expect(t, c.Recv(), "route.v3.VirtualHost: rc/web aliases=rc/www.example.com")
	// A host that was not found is sent once it is.
	h.put(vhost("rc/org", "*.org"))
	expect(t, c.Recv(), "route.v3.VirtualHost: rc/org aliases=rc/nowhere.org")
	// Unsubscribing by the virtual host's name drops the alias that got it.
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNamesUnsubscribe: []string{"rc/api"}})
	c.Barrier(h.putSecret)
	h.put(vhost("rc/api", "api.*", "x.y"))
	c.Barrier(h.putSecret)
	// Deleting a known virtual host removes it by name, and the alias it
	// served, still subscribed, now gets the not-found answer.
	h.remove(resource.VirtualHostURL, "rc/web")
	expect(t, c.Recv(), "route.v3.VirtualHost: rc/www.example.com (no payload) aliases=rc/www.example.com -rc/web")
}

// The per-type services (StreamClusters, DeltaClusters, DeltaVirtualHosts,
// …) serve their one type: a request without a type_url gets it, a request
// for another type ends the stream with InvalidArgument.
func TestPerTypeServices(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"), vhost("rc/v", "v.com"))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cds := clusterservice.NewClusterDiscoveryServiceClient(h.conn)
	s, err := cds.StreamClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&discoveryv3.DiscoveryRequest{})
	r, err := s.Recv()
	if err != nil || r.TypeUrl != resource.ClusterURL || len(r.Resources) != 1 {
		t.Fatalf("StreamClusters: %v %v", r, err)
	}
	ds, err := cds.DeltaClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"a"}})
	if dr, err := ds.Recv(); err != nil || len(dr.Resources) != 1 {
		t.Fatalf("DeltaClusters: %v %v", dr, err)
	}
	vs, err := routeservice.NewVirtualHostDiscoveryServiceClient(h.conn).DeltaVirtualHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vs.Send(&discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"rc/v.com"}})
	if vr, err := vs.Recv(); err != nil || describe(vr) != "route.v3.VirtualHost: rc/v aliases=rc/v.com" {
		t.Fatalf("DeltaVirtualHosts: %v %v", vr, err)
	}
	bad, err := cds.StreamClusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerURL})
	if _, err := bad.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("wrong type on StreamClusters: %v", err)
	}
}

// docs/architecture.md §6: a stream's subscriptions are bounded.
func TestSubscriptionLimit(t *testing.T) {
	h := newHarness(t, func(o *protocol.Options) { o.MaxSubscriptions = 3 })
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "a", "b", "c", "d")
	select {
	case err := <-c.Errs:
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("err = %v", err)
		}
	case r := <-c.Resps:
		t.Fatalf("answered over the limit: %v", describe(r))
	case <-time.After(wait):
		t.Fatal("stream not ended")
	}
}

// The apply-to-send histogram measures changes of contents reaching
// clients, not answers to requests.
func TestApplyToSendLatencyCountsChangesOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *protocol.Options) { o.Registerer = reg })
	h.put(cluster("a"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "a")
	c.Ack(c.Recv())
	count := func() uint64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "xdsd_apply_to_send_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		t.Fatal("no xdsd_apply_to_send_seconds")
		return 0
	}
	// A barrier answers a request too; once it is received, the stream
	// (which records a response after sending it) has recorded the ones
	// before.
	c.Barrier(h.putSecret)
	if n := count(); n != 0 {
		t.Fatalf("after answering requests only: %d samples, want 0", n)
	}
	h.put(clusterTagged("a", "new"))
	c.Ack(c.Recv())
	c.Barrier(h.putSecret)
	if n := count(); n != 1 {
		t.Fatalf("after a change: %d samples, want 1", n)
	}
}

// docs/protocol.md §2.3, §4.2: dropping a locator while the plain name stays
// subscribed (selecting the same variant) needs no response.
func TestTP2_4_2_LocatorUnsubscribeKeepsPlainName(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "p"), route("r", "env=test", "t"))
	c := h.delta(node("n", map[string]string{"env": "prod"}))
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNamesSubscribe: []string{"r"},
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	r := c.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [env=prod]")
	c.Ack(r)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	c.Barrier(h.putSecret)
	// The plain subscription still gets changes.
	h.put(route("r", "env=prod", "p2"), route("r", "env=test", "t"))
	expect(t, c.Recv(), "route.v3.RouteConfiguration: r")
}

// Every per-type service serves its type, SotW and delta (the ADS services
// are covered by every other test).
func TestPerTypeServicesEveryType(t *testing.T) {
	h := newHarness(t)
	payloads := map[string]string{
		resource.ListenerURL:        `{"@type": "envoy.config.listener.v3.Listener", "name": "n"}`,
		resource.RouteURL:           `{"@type": "envoy.config.route.v3.RouteConfiguration", "name": "n"}`,
		resource.ScopedRouteURL:     `{"@type": "envoy.config.route.v3.ScopedRouteConfiguration", "name": "n", "route_configuration_name": "r", "key": {"fragments": [{"string_key": "k"}]}}`,
		resource.ClusterURL:         `{"@type": "envoy.config.cluster.v3.Cluster", "name": "n"}`,
		resource.EndpointURL:        `{"@type": "envoy.config.endpoint.v3.ClusterLoadAssignment", "cluster_name": "n"}`,
		resource.LbEndpointURL:      `{"@type": "envoy.config.endpoint.v3.LbEndpoint", "endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}}}}`,
		resource.SecretURL:          `{"@type": "envoy.extensions.transport_sockets.tls.v3.Secret", "name": "n"}`,
		resource.RuntimeURL:         `{"@type": "envoy.service.runtime.v3.Runtime", "name": "n"}`,
		resource.ExtensionConfigURL: `{"@type": "envoy.config.core.v3.TypedExtensionConfig", "name": "n", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}`,
	}
	var vs []*resource.Variant
	for typeURL, p := range payloads {
		vs = append(vs, variant(typeURL, "n", "", p))
	}
	h.put(vs...)
	services := map[string]string{ // method → type
		"/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners":                resource.ListenerURL,
		"/envoy.service.listener.v3.ListenerDiscoveryService/DeltaListeners":                 resource.ListenerURL,
		"/envoy.service.route.v3.RouteDiscoveryService/StreamRoutes":                         resource.RouteURL,
		"/envoy.service.route.v3.RouteDiscoveryService/DeltaRoutes":                          resource.RouteURL,
		"/envoy.service.route.v3.ScopedRoutesDiscoveryService/StreamScopedRoutes":            resource.ScopedRouteURL,
		"/envoy.service.route.v3.ScopedRoutesDiscoveryService/DeltaScopedRoutes":             resource.ScopedRouteURL,
		"/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters":                   resource.ClusterURL,
		"/envoy.service.cluster.v3.ClusterDiscoveryService/DeltaClusters":                    resource.ClusterURL,
		"/envoy.service.endpoint.v3.EndpointDiscoveryService/StreamEndpoints":                resource.EndpointURL,
		"/envoy.service.endpoint.v3.EndpointDiscoveryService/DeltaEndpoints":                 resource.EndpointURL,
		"/envoy.service.endpoint.v3.LocalityEndpointDiscoveryService/DeltaLocalityEndpoints": resource.LbEndpointURL,
		"/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets":                      resource.SecretURL,
		"/envoy.service.secret.v3.SecretDiscoveryService/DeltaSecrets":                       resource.SecretURL,
		"/envoy.service.runtime.v3.RuntimeDiscoveryService/StreamRuntime":                    resource.RuntimeURL,
		"/envoy.service.runtime.v3.RuntimeDiscoveryService/DeltaRuntime":                     resource.RuntimeURL,
		"/envoy.service.extension.v3.ExtensionConfigDiscoveryService/StreamExtensionConfigs": resource.ExtensionConfigURL,
		"/envoy.service.extension.v3.ExtensionConfigDiscoveryService/DeltaExtensionConfigs":  resource.ExtensionConfigURL,
	}
	for method, typeURL := range services {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			s, err := h.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(method, "/Delta") {
				if err := s.SendMsg(&discoveryv3.DeltaDiscoveryRequest{ResourceNamesSubscribe: []string{"n"}}); err != nil {
					t.Fatal(err)
				}
				var r discoveryv3.DeltaDiscoveryResponse
				if err := s.RecvMsg(&r); err != nil || r.TypeUrl != typeURL || len(r.Resources) != 1 || r.Resources[0].Resource.GetTypeUrl() != typeURL {
					t.Fatalf("%v %v", &r, err)
				}
				return
			}
			if err := s.SendMsg(&discoveryv3.DiscoveryRequest{ResourceNames: []string{"n"}}); err != nil {
				t.Fatal(err)
			}
			var r discoveryv3.DiscoveryResponse
			if err := s.RecvMsg(&r); err != nil || r.TypeUrl != typeURL || len(r.Resources) != 1 || r.Resources[0].GetTypeUrl() != typeURL {
				t.Fatalf("%v %v", &r, err)
			}
		})
	}
}

// docs/protocol.md §5.2 and §5.3: a route configuration name may hold "/" (the
// host is what follows the last one), and a reconnecting client sends "*"
// with the names it wants, each answered again.
func TestVHDS_5_2_5_3_NamesAndReconnect(t *testing.T) {
	h := newHarness(t)
	h.put(vhost("ns/rc/web", "www.example.com"), vhost("rc/web", "other.example.com"))
	c := h.delta(nil)
	c.Sub(resource.VirtualHostURL)
	expect(t, c.Recv(), "route.v3.VirtualHost: ")
	c.Sub(resource.VirtualHostURL, "ns/rc/www.example.com")
	r := c.Recv()
	expect(t, r, "route.v3.VirtualHost: ns/rc/web aliases=ns/rc/www.example.com")
	held := map[string]string{"ns/rc/web": r.Resources[0].Version}
	// Reconnecting: "*" and the names, with what it holds.
	d := h.delta(nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNamesSubscribe: []string{"*", "ns/rc/www.example.com"}, InitialResourceVersions: held})
	expect(t, d.Recv(), "route.v3.VirtualHost: ns/rc/web aliases=ns/rc/www.example.com")
}

// TP2 "Transition Scenarios" after a reconnect: a client that declared the
// variant it holds in initial_resource_versions (§2.9) and has it replaced
// later is told of the replacement and of the deletion in one response,
// as one that was sent the variant on this stream would be: a variant's
// version names it, so the server knows which constraints the client holds.
func TestTP2_4_3_DeclaredVariantReplacedInOneResponse(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "exists(env)", "old"), route("r", "!exists(env)", "none"))
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
	r := c.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [exists(env)]")

	d := h.delta(nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, InitialResourceVersions: map[string]string{"r": r.Resources[0].Version},
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
	d.Barrier(h.putSecret)
	h.update(db.Update{
		Puts:    []*resource.Variant{route("r", "env=test", "new")},
		Deletes: []resource.Key{{Type: resource.RouteURL, Name: "r", Constraints: constraint.MustParse("exists(env)").Key()}},
	})
	expect(t, d.Recv(), "route.v3.RouteConfiguration: r [env=test] -r [exists(env)]")
}

// docs/architecture.md §6: what a reconnecting delta client declares in
// initial_resource_versions is kept per stream, so it counts against the
// same bound as subscriptions.
func TestDeclaredVersionsCountAgainstTheLimit(t *testing.T) {
	h := newHarness(t, func(o *protocol.Options) { o.MaxSubscriptions = 3 })
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"a"},
		InitialResourceVersions: map[string]string{"a": "1", "b": "1", "c": "1", "d": "1"}})
	select {
	case err := <-c.Errs:
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "initial_resource_versions") {
			t.Fatalf("err = %v", err)
		}
	case r := <-c.Resps:
		t.Fatalf("answered over the limit: %v", describe(r))
	case <-time.After(wait):
		t.Fatal("stream not ended")
	}
}
