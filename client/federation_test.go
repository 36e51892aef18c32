package client_test

import (
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// Federation: names are routed by authority to their servers.
func TestFederation(t *testing.T) {
	one, two := testorigin.Start(t), testorigin.Start(t)
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

// A name whose authority is not in the bootstrap is refused at once.
func TestUnknownAuthorityRefused(t *testing.T) {
	o := testorigin.Start(t)
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	_, err := c.Watch(t.Context(), resource.ListenerURL, "xdstp://zzz/envoy.config.listener.v3.Listener/x", func(client.Event) {})
	if err == nil {
		t.Fatal("accepted")
	}
	t.Log(err)
}
