package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The real grpc-go xDS client, bootstrapped against `xdsd serve` with the
// quickstart example applied, makes an RPC that succeeds — with legacy
// names (xds:///quickstart) and with xdstp:// names (xds://quickstart.xdsd/…).
func TestGRPCQuickstart(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	bs := bootstrap(x.xds, map[string]string{"quickstart.xdsd": ""}, nil)
	until(t, dial(t, "xds:///quickstart", bs), be.addr)
	until(t, dial(t, "xds://quickstart.xdsd/quickstart", bs), be.addr)

	// The exchange shows in the metrics.
	m := x.metrics(t)
	for _, want := range []string{
		`xdsd_streams{kind="ads-sotw"} 2`,
		`xdsd_pushes_total{type="envoy.config.listener.v3.Listener"}`,
		`xdsd_pushes_total{type="envoy.config.endpoint.v3.ClusterLoadAssignment"}`,
		`xdsd_acks_total{type="envoy.config.cluster.v3.Cluster"}`,
		`xdsd_apply_to_send_seconds_count`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// acked reports whether every stream of the server has ACKed the four
// types of the quickstart chain and NACKed nothing.
func acked(t *testing.T, x *proc) (bool, string) {
	cs := x.clients(t)
	if len(cs) == 0 {
		return false, "no client connected"
	}
	for _, c := range cs {
		types, _ := c["types"].([]any)
		got := map[string]bool{}
		for _, ty := range types {
			m := ty.(map[string]any)
			if m["last_nack"] != nil {
				return false, fmt.Sprintf("NACK: %v", m["last_nack"])
			}
			if m["acked_version"] != "" && m["acked_version"] == m["sent_version"] {
				got[m["type"].(string)] = true
			}
		}
		for _, want := range []string{"envoy.config.listener.v3.Listener", "envoy.config.route.v3.RouteConfiguration",
			"envoy.config.cluster.v3.Cluster", "envoy.config.endpoint.v3.ClusterLoadAssignment"} {
			if !got[want] {
				return false, fmt.Sprintf("%s not ACKed: %v", want, types)
			}
		}
	}
	return true, ""
}

// `xdsd serve --watch examples/quickstart`, the README's first command,
// serves a grpc-go client out of the box: the client fetches and ACKs the
// whole chain, and when the example's backend port is free here, an RPC
// through it succeeds.
func TestGRPCServeWatchQuickstart(t *testing.T) {
	x := startXdsd(t, "--watch", "../examples/quickstart")
	if lis, err := net.Listen("tcp", "127.0.0.1:50051"); err == nil {
		s := grpc.NewServer()
		healthpb.RegisterHealthServer(s, health.NewServer())
		go s.Serve(lis)
		defer s.Stop()
		until(t, dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil)), "127.0.0.1:50051")
	} else {
		t.Logf("port 50051 is taken (%v): checking the xDS exchange only", err)
	}
	conn := dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil))
	deadline := time.Now().Add(30 * time.Second)
	for {
		rpc(conn, time.Second) // paces the loop; the backend may be absent
		ok, why := acked(t, x)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("quickstart chain not ACKed: %s", why)
		}
	}
}

// Federation (TP1, gRFC A47): two `xdsd serve` processes are two
// authorities, serving examples/federation. The listener and route come
// from auth-a, the cluster and its endpoints from auth-b, and the client
// (dialing xds://auth-a/svc) puts it together through its bootstrap's
// authorities.
func TestGRPCFederation(t *testing.T) {
	be := startBackend(t)
	a, b := startXdsd(t), startXdsd(t)
	a.apply(t, withPorts(t, "federation/auth-a", nil))
	b.apply(t, withPorts(t, "federation/auth-b", map[int]int{50051: be.port}))
	// The default server is neither authority, so nothing is found by
	// accident.
	bs := bootstrap("127.0.0.1:1", map[string]string{"auth-a": a.xds, "auth-b": b.xds}, nil)
	until(t, dial(t, "xds://auth-a/svc", bs), be.addr)
	for _, tc := range []struct {
		p     *proc
		types string
	}{
		{a, "envoy.config.listener.v3.Listener envoy.config.route.v3.RouteConfiguration"},
		{b, "envoy.config.cluster.v3.Cluster envoy.config.endpoint.v3.ClusterLoadAssignment"},
	} {
		cs := tc.p.clients(t)
		if len(cs) != 1 {
			t.Fatalf("%d streams, want 1", len(cs))
		}
		var got []string
		for _, ty := range cs[0]["types"].([]any) {
			got = append(got, ty.(map[string]any)["type"].(string))
		}
		if strings.Join(got, " ") != tc.types {
			t.Errorf("authority served %v, want %s", got, tc.types)
		}
	}
}

// A route change applied while the client runs moves its RPCs to another
// backend.
func TestGRPCRouteChange(t *testing.T) {
	one, two := startBackend(t), startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: one.port}))
	conn := dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil))
	until(t, conn, one.addr)
	x.apply(t, fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: second
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: second
endpoints:
- locality: {region: local}
  load_balancing_weight: 1
  lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}, load_balancing_weight: 1}]
---
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: quickstart
virtual_hosts:
- name: quickstart
  domains: ["*"]
  routes: [{match: {prefix: ""}, route: {cluster: second}}]
`, two.port))
	until(t, conn, two.addr)
}

// TP2 through node metadata (docs/architecture.md §4.5): two unmodified clients whose
// node metadata says env=prod and env=test reach different backends through
// the variants of one RouteConfiguration (examples/tp2-variants).
func TestGRPCVariantsByNodeMetadata(t *testing.T) {
	def, prod, v1, prodV1 := startBackend(t), startBackend(t), startBackend(t), startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "tp2-variants", map[int]int{50061: def.port, 50062: prod.port, 50063: v1.port, 50064: prodV1.port}))
	for _, tc := range []struct {
		meta map[string]string
		want backend
	}{
		{map[string]string{"env": "prod"}, prod},
		{map[string]string{"env": "test"}, def},
		{map[string]string{"env": "test", "version": "v1"}, v1},
		{map[string]string{"env": "prod", "version": "v1"}, prodV1},
	} {
		until(t, dial(t, "xds:///tp2", bootstrap(x.xds, nil, tc.meta)), tc.want.addr)
	}
}
