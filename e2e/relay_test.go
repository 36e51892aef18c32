package e2e

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"
)

// The real grpc-go xDS client makes RPCs through `xdsd relay` in front of
// `xdsd serve`; ten clients cost the origin one stream and one
// subscription per resource (its /v1/clients says so); with the origin
// killed, those ten clients keep working and a new client is served from
// the relay's cache; with the origin back, changes reach them all.
func TestGRPCThroughRelay(t *testing.T) {
	one, two := startBackend(t), startBackend(t)
	origin := startXdsd(t)
	origin.apply(t, withPorts(t, "quickstart", map[int]int{50051: one.port}))
	r := startRelay(t, origin.xds)
	bs := bootstrap(r.xds, nil, nil)
	var clients []*grpc.ClientConn
	for range 10 {
		conn := dial(t, "xds:///quickstart", bs)
		until(t, conn, one.addr)
		clients = append(clients, conn)
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

	// The origin goes away: the clients keep working, and a new one is
	// served from the relay's cache.
	addr, store := origin.xds, origin.storePath()
	origin.stop()
	for _, conn := range clients {
		until(t, conn, one.addr)
	}
	newcomer := dial(t, "xds:///quickstart", bs)
	until(t, newcomer, one.addr)
	clients = append(clients, newcomer)

	// It comes back, with a change: every client follows it.
	origin = startXdsdAt(t, store, addr)
	origin.apply(t, fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: quickstart
endpoints:
- locality: {region: local}
  load_balancing_weight: 1
  lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}, load_balancing_weight: 1}]
`, two.port))
	for _, conn := range clients {
		until(t, conn, two.addr)
	}
}

// A chain: client → relay → relay → origin. Each of TP2's four variants of
// the route sends its traffic to a backend of its own, so a client given
// the wrong variant anywhere in the chain lands on the wrong backend:
// unmodified clients, with their node metadata as parameters, each reach
// theirs.
func TestGRPCThroughTwoRelays(t *testing.T) {
	var be [4]backend
	ports := map[int]int{}
	for i := range be {
		be[i] = startBackend(t)
		ports[50061+i] = be[i].port
	}
	origin := startXdsd(t)
	origin.apply(t, withPorts(t, "tp2-variants", ports))
	first := startRelay(t, origin.xds)
	second := startRelay(t, first.xds)
	for _, c := range []struct {
		meta map[string]string
		want backend
	}{
		{nil, be[0]},
		{map[string]string{"env": "prod"}, be[1]},
		{map[string]string{"version": "v1"}, be[2]},
		{map[string]string{"env": "prod", "version": "v1"}, be[3]},
	} {
		until(t, dial(t, "xds:///tp2", bootstrap(second.xds, nil, c.meta)), c.want.addr)
	}
}
