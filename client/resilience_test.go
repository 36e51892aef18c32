package client_test

import (
	"net"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// freeAddr reserves a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// The server restarted mid-watch: watchers keep their last values, and the
// client resyncs over delta without downloading again what did not change
// (initial_resource_versions, docs/protocol.md §2.9).
func TestServerRestartResync(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(cluster("a", "1") + "---\n" + cluster("b", "1") + "---\n" + cluster("c", "1"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	rs := map[string]*recorder{}
	for _, n := range []string{"a", "b", "c"} {
		rs[n] = newRecorder(t)
		c.Watch(t.Context(), resource.ClusterURL, n, rs[n].handle)
		rs[n].expect(client.Updated, n, `"1"`)
	}
	before := c.Stats()
	o.Stop()
	o.Apply(cluster("b", "2"))
	o.Start()
	rs["b"].expect(client.Updated, "b", `"2"`)
	barrier(t, c, o)
	after := c.Stats()
	// b and the barrier's secret; a and c were not sent again.
	if got := after.Resources - before.Resources; got != 2 {
		t.Errorf("resync downloaded %d resources, want 2 (b and the barrier)", got)
	}
	rs["a"].none()
	rs["c"].none()
}

// The first server cannot be reached: the client falls back to the next
// entry of xds_servers, and returns to the first when it is back.
func TestServerFallbackAndReturn(t *testing.T) {
	backup := servertest.Start(t)
	backup.Apply(cluster("a", "backup"))
	primaryAddr := freeAddr(t)
	c := newClient(t, bs{servers: []string{primaryAddr, backup.Addr}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
	r.expect(client.Updated, "a", "backup")
	primary := servertest.New(t, primaryAddr)
	primary.Apply(cluster("a", "primary"))
	primary.Start()
	r.expect(client.Updated, "a", "primary")
}

// #alt=: when the name's authority cannot be reached for AltTimeout, the
// alt URL is fetched instead; the client returns to the primary when it is
// back.
func TestAltFailoverAndReturn(t *testing.T) {
	onprem := servertest.Start(t)
	alt := "xdstp://onprem/envoy.config.cluster.v3.Cluster/x"
	onprem.Apply(cluster(alt, "from-alt"))
	cloudAddr := freeAddr(t)
	b := bs{servers: []string{onprem.Addr}, authorities: map[string][]string{"cloud": {cloudAddr}, "onprem": {onprem.Addr}}}.build(t)
	c := newClient(t, b, client.Options{AltTimeout: 200 * time.Millisecond})
	primary := "xdstp://cloud/envoy.config.cluster.v3.Cluster/x"
	r := newRecorder(t)
	if _, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt="+alt, r.handle); err != nil {
		t.Fatal(err)
	}
	e := r.expect(client.Updated, primary, "from-alt")
	if len(e.Via) != 1 || e.Via[0] != alt {
		t.Errorf("via %v", e.Via)
	}
	cloud := servertest.New(t, cloudAddr)
	cloud.Apply(cluster(primary, "from-primary"))
	cloud.Start()
	e = r.expect(client.Updated, primary, "from-primary")
	if len(e.Via) != 0 {
		t.Errorf("back on the primary, via %v", e.Via)
	}
}

// Federation: names are routed by authority to their servers.
func TestFederation(t *testing.T) {
	one, two := servertest.Start(t), servertest.Start(t)
	n1, n2 := "xdstp://one/envoy.config.cluster.v3.Cluster/x", "xdstp://two/envoy.config.cluster.v3.Cluster/x"
	one.Apply(cluster(n1, "from-one"))
	two.Apply(cluster(n2, "from-two"))
	c := newClient(t, bs{servers: []string{freeAddr(t)}, authorities: map[string][]string{"one": {one.Addr}, "two": {two.Addr}}}.build(t), client.Options{})
	r1, r2 := newRecorder(t), newRecorder(t)
	c.Watch(t.Context(), resource.ClusterURL, n1, r1.handle)
	c.Watch(t.Context(), resource.ClusterURL, n2, r2.handle)
	r1.expect(client.Updated, n1, "from-one")
	r2.expect(client.Updated, n2, "from-two")
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "xdstp://three/envoy.config.cluster.v3.Cluster/x", r1.handle); err == nil {
		t.Error("a name in an authority the bootstrap lacks was accepted")
	}
}
