package client_test

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// TP1's computed context parameters: a server authors listeners under
// xds.resource.vip, a client adds the VIP it computed to the name it was
// configured with (WatchComputed) and gets the listener for that VIP;
// another VIP gets another listener, or none. A configured name carrying
// xds.* parameters is refused.
func TestWatchComputedAttributes(t *testing.T) {
	o := testorigin.Start(t)
	const base = "xdstp://a/envoy.config.cluster.v3.Cluster/by-vip?bar=baz"
	o.Apply(cluster(base+"&xds.resource.vip=96.54.3.1", "vip-1"))
	o.Apply(cluster(base+"&xds.resource.vip=96.54.3.2", "vip-2"))
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}, sotw: tr.sotw}.build(t), client.Options{DoesNotExistTimeout: 500e6})
			for vip, tag := range map[string]string{"96.54.3.1": "vip-1", "96.54.3.2": "vip-2"} {
				r := newRecorder(t)
				if _, err := c.WatchComputed(t.Context(), resource.ClusterURL, base, map[string]string{"vip": vip}, r.handle); err != nil {
					t.Fatal(err)
				}
				e := r.expect(client.Updated, "", tag)
				if !strings.Contains(e.Name, "xds.resource.vip="+vip) {
					t.Errorf("event for %s", e.Name)
				}
			}
			r := newRecorder(t)
			if _, err := c.WatchComputed(t.Context(), resource.ClusterURL, base, map[string]string{"vip": "10.0.0.9"}, r.handle); err != nil {
				t.Fatal(err)
			}
			r.expect(client.DoesNotExist, "", "")
		})
	}
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	if _, err := c.Watch(t.Context(), resource.ClusterURL, base+"&xds.resource.vip=96.54.3.1", func(client.Event) {}); err == nil ||
		!strings.Contains(err.Error(), "reserves for attributes a client computes") {
		t.Errorf("Watch of a configured name with xds.resource.vip: %v", err)
	}
	if _, err := c.WatchComputed(t.Context(), resource.ClusterURL, "legacy", map[string]string{"vip": "1"}, func(client.Event) {}); err == nil {
		t.Error("computed attributes on a legacy name were accepted")
	}
}
