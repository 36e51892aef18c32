package e2e

import (
	"fmt"
	"testing"
)

// The real grpc-go xDS client makes RPCs through `xdsd relay` in front of
// `xdsd serve`; ten clients cost the origin one stream and one
// subscription per resource (its /v1/clients says so); with the origin
// killed, the clients keep working and a new client is served from the
// relay's cache; with the origin back, changes flow again.
func TestGRPCThroughRelay(t *testing.T) {
	one, two := startBackend(t), startBackend(t)
	origin := startXdsd(t)
	origin.apply(t, withPorts(t, "quickstart", map[int]int{50051: one.port}))
	r := startRelay(t, origin.xds)
	bs := bootstrap(r.xds, nil, nil)
	for range 10 {
		until(t, dial(t, "xds:///quickstart", bs), one.addr)
	}
	cs := origin.clients(t)
	if len(cs) != 1 {
		t.Fatalf("origin serves %d streams, want 1 (the relay's)", len(cs))
	}
	for _, ty := range cs[0]["types"].([]any) {
		m := ty.(map[string]any)
		subs := m["subscriptions"].([]any)
		if len(subs) != 1 {
			t.Errorf("origin holds %d %s subscriptions, want 1: %v", len(subs), m["type"], subs)
		}
	}
	if got := len(r.clients(t)); got != 10 {
		t.Errorf("relay serves %d downstream streams, want 10", got)
	}
	m := r.metrics(t)
	for _, want := range []string{"xdsd_relay_cache_hits_total", "xdsd_relay_upstream_connected", "xdsd_streams{kind=\"ads-sotw\"} 10"} {
		if !contains(m, want) {
			t.Errorf("relay metrics lack %s", want)
		}
	}

	// The origin goes away.
	addr, store := origin.xds, origin.storePath()
	origin.stop()
	survivor := dial(t, "xds:///quickstart", bs)
	until(t, survivor, one.addr)
	until(t, dial(t, "xds:///quickstart", bs), one.addr)

	// It comes back, with a change.
	origin = startXdsdAt(t, store, addr)
	origin.apply(t, fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: quickstart
endpoints:
- locality: {region: local}
  load_balancing_weight: 1
  lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}, load_balancing_weight: 1}]
`, two.port))
	until(t, survivor, two.addr)
}

// A chain: client → relay → relay → origin.
func TestGRPCThroughTwoRelays(t *testing.T) {
	be := startBackend(t)
	origin := startXdsd(t)
	origin.apply(t, withPorts(t, "tp2-variants", map[int]int{50061: be.port, 50062: be.port, 50063: be.port, 50064: be.port}))
	first := startRelay(t, origin.xds)
	second := startRelay(t, first.xds)
	until(t, dial(t, "xds:///tp2", bootstrap(second.xds, nil, map[string]string{"env": "prod"})), be.addr)
}
