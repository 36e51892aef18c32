package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

func expect(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse, want string) {
	t.Helper()
	if got := describe(r); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if r.Nonce == "" {
		t.Fatalf("response without a nonce")
	}
}

// docs/protocol.md §2.4: a first request with both lists empty is a wildcard,
// and unlike SotW, subscribing a name afterwards keeps it; only
// unsubscribing "*" ends it.
func TestDelta_2_4_ImplicitWildcardPersists(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"))
	c := h.delta(node("n", nil))
	c.Sub(resource.ClusterURL)
	r := c.Recv()
	expect(t, r, "cluster.v3.Cluster: a")
	c.Ack(r)
	h.put(cluster("zz"), route("rr", "", "x"))
	expect(t, c.Recv(), "cluster.v3.Cluster: zz")
	c.Sub(resource.ClusterURL, "named")
	expect(t, c.Recv(), "cluster.v3.Cluster: -named") // §2.5 for the named one
	h.put(cluster("b"))
	expect(t, c.Recv(), "cluster.v3.Cluster: b") // still a wildcard
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"*"}})
	c.Barrier(h.putSecret)
	h.put(cluster("c"))
	h.put(cluster("named"))
	expect(t, c.Recv(), "cluster.v3.Cluster: named")
}

// An empty first response still goes out, so a client waiting for its
// first wildcard answer (Envoy's init) is not left waiting.
func TestDelta_2_4_EmptyWildcardAnswered(t *testing.T) {
	h := newHarness(t)
	c := h.delta(nil)
	c.Sub(resource.ListenerURL)
	expect(t, c.Recv(), "listener.v3.Listener: ")
}

// docs/protocol.md §2.2, §2.5: every subscribed name is answered, even one the
// server believes the client holds; a name that does not exist is answered
// in removed_resources; deleting a held resource removes it.
func TestDelta_2_2_SubscribeAlwaysAnswered(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "a", "nope")
	r := c.Recv()
	expect(t, r, "cluster.v3.Cluster: a -nope")
	c.Ack(r)
	c.Sub(resource.ClusterURL, "a")
	expect(t, c.Recv(), "cluster.v3.Cluster: a")
	h.remove(resource.ClusterURL, "a")
	expect(t, c.Recv(), "cluster.v3.Cluster: -a")
	h.put(cluster("nope"))
	expect(t, c.Recv(), "cluster.v3.Cluster: nope")
}

// docs/protocol.md §2.3: unsubscribing an unknown name is ignored and needs no
// response; a client holding "*" and X that drops X is sent X again, since
// the wildcard still covers it.
func TestDelta_2_3_Unsubscribe(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("x"), cluster("y"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "*", "x")
	r := c.Recv()
	expect(t, r, "cluster.v3.Cluster: x y")
	c.Ack(r)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"never"}})
	c.Barrier(h.putSecret)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"x"}})
	expect(t, c.Recv(), "cluster.v3.Cluster: x")

	// Without a wildcard, a dropped name is simply no longer sent.
	d := h.delta(nil)
	d.Sub(resource.ClusterURL, "x")
	d.Recv()
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"x"}})
	d.Barrier(h.putSecret)
	h.put(clusterTagged("x", "changed"))
	d.Barrier(h.putSecret)
}

// docs/protocol.md §2.1: subscription changes apply whatever the nonce; an ACK
// is recorded, a NACK recorded with its error and not answered.
func TestDelta_2_1_NoncesAckNack(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *protocol.Options) { o.Registerer = reg })
	h.put(cluster("a"), cluster("b"))
	c := h.delta(node("d", nil))
	c.Sub(resource.ClusterURL, "a")
	r1 := c.Recv()
	h.put(cluster("c")) // a new revision: r2 goes out under a newer version than r1
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: "stale-or-unknown", ResourceNamesSubscribe: []string{"b"}})
	r2 := c.Recv()
	expect(t, r2, "cluster.v3.Cluster: b")
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r1.Nonce})
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r2.Nonce, ErrorDetail: &status.Status{Code: 13, Message: "bad b"}})
	c.Barrier(h.putSecret)
	ts := h.srv.Streams()[0].Types
	ok := false
	for _, s := range ts {
		if s.Type == "envoy.config.cluster.v3.Cluster" {
			// The ACK is of r1: its version, not the newest sent.
			ok = s.AckedNonce == r1.Nonce && s.AckedVersion == r1.SystemVersionInfo && s.AckedVersion != r2.SystemVersionInfo &&
				s.LastNack != nil && s.LastNack.Error == "bad b" && s.LastNack.Nonce == r2.Nonce && s.LastNack.Version == r2.SystemVersionInfo
		}
	}
	if !ok {
		t.Fatalf("status %+v", ts)
	}
	// The ACK and the NACK are counted by type.
	counts := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == "envoy.config.cluster.v3.Cluster" {
					counts[mf.GetName()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if counts["xdsd_acks_total"] != 1 || counts["xdsd_nacks_total"] != 1 {
		t.Errorf("metrics %v, want one ACK and one NACK of clusters", counts)
	}
}

// docs/protocol.md §2.9, docs/architecture.md §4.3: a reconnecting client that lists what it
// holds in initial_resource_versions is sent only what differs.
func TestDelta_2_9_ReconnectSendsOnlyWhatChanged(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"), cluster("b"), cluster("c"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "*")
	r := c.Recv()
	versions := map[string]string{}
	for _, res := range r.Resources {
		versions[res.Name] = res.Version
	}
	h.put(clusterTagged("b", "new"))
	h.remove(resource.ClusterURL, "c")
	d := h.delta(nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: versions})
	expect(t, d.Recv(), "cluster.v3.Cluster: b -c")
	// The legacy reconnect form: an empty subscribe list (implicit wildcard).
	e := h.delta(nil)
	e.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, InitialResourceVersions: map[string]string{"a": versions["a"]}})
	expect(t, e.Recv(), "cluster.v3.Cluster: b")
}

// TP1 "Normalization": a client's parameter order or escaping never causes
// a miss.
func TestTP1_3_2_NamesNormalized(t *testing.T) {
	h := newHarness(t)
	n := "xdstp://auth/envoy.config.cluster.v3.Cluster/svc?a=1&b=2"
	h.put(cluster(n))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "xdstp://auth/envoy.config.cluster.v3.Cluster/%73vc?b=2&a=%31")
	expect(t, c.Recv(), "cluster.v3.Cluster: "+n)
	s := h.sotw(nil)
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"xdstp://auth/envoy.config.cluster.v3.Cluster/svc?b=2&a=1"}})
	expectNames(t, s.Recv(), resource.ClusterURL, n)
}

// TP1 glob collections (docs/protocol.md §3.4, §3.7): a glob delivers the
// immediate children with identical parameters as they come and go; an
// empty glob is answered with the glob URL in removed_resources.
func TestTP1_3_4_GlobCollections(t *testing.T) {
	h := newHarness(t)
	const (
		glob  = "xdstp://a/envoy.config.listener.v3.Listener/foo/*?p=1"
		empty = "xdstp://a/envoy.config.listener.v3.Listener/none/*"
		m1    = "xdstp://a/envoy.config.listener.v3.Listener/foo/one?p=1"
		m2    = "xdstp://a/envoy.config.listener.v3.Listener/foo/two?p=1"
	)
	lis := func(n string) *resource.Variant {
		return variant(resource.ListenerURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.listener.v3.Listener", "name": %q}`, n))
	}
	h.put(lis(m1), lis("xdstp://a/envoy.config.listener.v3.Listener/foo/one"), lis("xdstp://a/envoy.config.listener.v3.Listener/foo/deep/x?p=1"))
	c := h.delta(nil)
	c.Sub(resource.ListenerURL, glob, empty)
	r := c.Recv()
	expect(t, r, "listener.v3.Listener: "+m1+" -"+empty)
	c.Ack(r)
	h.put(lis(m2))
	expect(t, c.Recv(), "listener.v3.Listener: "+m2)
	h.remove(resource.ListenerURL, m1)
	expect(t, c.Recv(), "listener.v3.Listener: -"+m1)
	h.put(lis("xdstp://a/envoy.config.listener.v3.Listener/none/first"))
	expect(t, c.Recv(), "listener.v3.Listener: xdstp://a/envoy.config.listener.v3.Listener/none/first")
}

// TP1 redirects and list collections: a stored xds.core.v3.ResourceLocator
// is sent as the resource; a collection is an ordinary resource.
func TestTP1_3_3_RedirectsAndCollections(t *testing.T) {
	h := newHarness(t)
	vs := docs(t, `type: lds
name: xdstp://a/envoy.config.listener.v3.Listener/old
resource:
  "@type": type.googleapis.com/xds.core.v3.ResourceLocator
  authority: a
  resource_type: envoy.config.listener.v3.Listener
  id: new
---
name: xdstp://a/envoy.config.listener.v3.ListenerCollection/all
resource:
  "@type": type.googleapis.com/envoy.config.listener.v3.ListenerCollection
  entries:
  - locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: new}
`)
	h.put(vs...)
	c := h.delta(nil)
	c.Sub(resource.ListenerURL, "xdstp://a/envoy.config.listener.v3.Listener/old")
	r := c.Recv()
	if len(r.Resources) != 1 || r.Resources[0].Resource.TypeUrl != resource.LocatorURL || r.Resources[0].Name != "xdstp://a/envoy.config.listener.v3.Listener/old" {
		t.Fatalf("redirect: %v", r)
	}
	c.Sub(resource.ListenerCollectionURL, "xdstp://a/envoy.config.listener.v3.ListenerCollection/all")
	r = c.Recv()
	if len(r.Resources) != 1 || r.Resources[0].Resource.TypeUrl != resource.ListenerCollectionURL {
		t.Fatalf("collection: %v", r)
	}
	entries, err := resource.CollectionEntries(r.Resources[0].Resource.Value)
	if err != nil || len(entries) != 1 {
		t.Fatalf("entries %v %v", entries, err)
	}
}

// docs/protocol.md §1.9 over delta ADS: the cluster and endpoints a batch
// removes go out after the route that stopped using them.
func TestDelta_1_9_MakeBeforeBreak(t *testing.T) {
	h := newHarness(t)
	cla := func(n string) *resource.Variant {
		return variant(resource.EndpointURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.endpoint.v3.ClusterLoadAssignment", "cluster_name": %q}`, n))
	}
	h.put(cluster("A"), cla("A"), route("r", "", "A"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL)
	c.Ack(c.Recv())
	c.Sub(resource.EndpointURL, "A", "B")
	c.Ack(c.Recv())
	c.Sub(resource.RouteURL, "r")
	c.Ack(c.Recv())
	h.update(dbUpdate(
		[]*resource.Variant{cluster("B"), cla("B"), route("r", "", "B")},
		[][2]string{{resource.ClusterURL, "A"}, {resource.EndpointURL, "A"}}))
	var seq []string
	for range 5 {
		seq = append(seq, describe(c.Recv()))
	}
	want := []string{
		"cluster.v3.Cluster: B",
		"endpoint.v3.ClusterLoadAssignment: B",
		"route.v3.RouteConfiguration: r",
		"cluster.v3.Cluster: -A",
		"endpoint.v3.ClusterLoadAssignment: -A",
	}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Fatalf("order\n%q\nwant\n%q", seq, want)
	}
}

// docs/protocol.md §2.7: a client that supports TTLs gets each variant's TTL and,
// while it holds the variant, heartbeats — name, version and TTL without the
// payload — well within the TTL. Other clients get neither.
func TestDelta_2_7_TTLAndHeartbeats(t *testing.T) {
	h := newHarness(t)
	const ttl = 300 * time.Millisecond
	a := cluster("a")
	a.TTL = ttl
	h.put(a, cluster("b"))
	c := h.delta(node("ttl", nil, "xds.config.supports-resource-ttl"))
	c.Sub(resource.ClusterURL, "a", "b")
	r := c.Recv()
	var version string
	for _, res := range r.Resources {
		switch res.Name {
		case "a":
			version = res.Version
			if res.GetTtl().AsDuration() != ttl {
				t.Errorf("a: ttl %v, want %s", res.GetTtl(), ttl)
			}
		case "b":
			if res.Ttl != nil {
				t.Errorf("b has no TTL, got %v", res.Ttl)
			}
		}
	}
	c.Ack(r)
	beat := func() {
		t.Helper()
		hb := c.Recv()
		if len(hb.Resources) != 1 || hb.Resources[0].Name != "a" || hb.Resources[0].Resource != nil ||
			hb.Resources[0].Version != version || hb.Resources[0].GetTtl().AsDuration() != ttl {
			t.Fatalf("want a heartbeat of a@%s, got %v", version, hb)
		}
		c.Ack(hb)
	}
	beat()
	// A client that does not support TTLs gets neither.
	d := h.delta(nil)
	d.Sub(resource.ClusterURL, "a")
	r = d.Recv()
	if r.Resources[0].Ttl != nil {
		t.Errorf("TTL sent to a client without the feature: %v", r.Resources[0].Ttl)
	}
	d.Ack(r)
	beat() // a heartbeat round's time has passed since d subscribed
	d.Barrier(h.putSecret)
	// A client reconnecting with a declared version is not sent a again,
	// but its TTL is renewed all the same.
	e := h.delta(node("ttl", nil, "xds.config.supports-resource-ttl"))
	e.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"a"},
		InitialResourceVersions: map[string]string{"a": version}})
	if hb := e.Recv(); len(hb.Resources) != 1 || hb.Resources[0].Resource != nil || hb.Resources[0].Version != version {
		t.Fatalf("after reconnection, want a heartbeat of a@%s, got %v", version, hb)
	}
	// Resent without a TTL, the TTL is gone.
	h.put(cluster("a"))
	for {
		r := c.Recv()
		c.Ack(r)
		if len(r.Resources) == 1 && r.Resources[0].Resource == nil {
			continue // a heartbeat round that was already due
		}
		if len(r.Resources) != 1 || r.Resources[0].Ttl != nil {
			t.Fatalf("want a without TTL, got %v", r)
		}
		break
	}
}

// docs/protocol.md §2.9 with TP2: variants of one resource applied together
// share a revision, and initial_resource_versions holds one version per
// name, so a version must say which variant the client holds. A client that
// held one variant and reconnects asking for another gets it; a variant
// deleted while it was away is removed.
func TestDelta_2_9_ReconnectWithVariants(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "p"), route("r", "env=test", "t"))
	c := h.delta(nil)
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	r := c.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [env=prod]")
	held := map[string]string{"r": r.Resources[0].Version}

	// Reconnecting with what it holds, for the same parameters: nothing.
	d := h.delta(nil)
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, InitialResourceVersions: held,
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	d.Barrier(h.putSecret)
	// Holding prod and asking for test (the same version number), it gets
	// test.
	e := h.delta(nil)
	e.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, InitialResourceVersions: held,
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
	if r := e.Recv(); len(r.Resources) != 1 || !strings.Contains(protocoltest.Describe(r), "r [env=test]") || r.Resources[0].Resource == nil {
		t.Fatalf("holding prod, asking for test: %s", protocoltest.Describe(r))
	}

	// A variant deleted while the client was away, its sibling kept: the
	// client is told, by the variant its parameters select.
	h.update(db.Update{Deletes: []resource.Key{{Type: resource.RouteURL, Name: "r", Constraints: "env=prod"}}})
	f := h.delta(nil)
	f.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, InitialResourceVersions: held,
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
	expect(t, f.Recv(), "route.v3.RouteConfiguration: -r")
}

// A client that half-closes its stream sends no more requests but still
// gets what it subscribed to: the server goes on sending (gRPC allows it)
// until the client goes away, and an update in flight is not dropped.
func TestHalfClosedStreamStillGetsUpdates(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"))
	c := h.delta(nil)
	c.Sub(resource.ClusterURL, "a")
	c.Ack(c.Recv())
	c.CloseSend()
	h.put(clusterTagged("a", "changed"))
	r := c.Recv()
	if len(r.Resources) != 1 || r.Resources[0].Name != "a" {
		t.Fatalf("after half-close: %s", describe(r))
	}
}
