package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil"
)

// tp2Split is a listener without constraints whose route configuration
// has variants for env=prod and env=test only, routed to backend port.
func tp2Split(port int, timeout string) string {
	return fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: split
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: split
    rds: {route_config_name: split, config_source: {ads: {}}}
    http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
---
name: split
constraints: env=prod
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: split, timeout: %[2]s}}]}]}
---
name: split
constraints: env=test
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: split, timeout: %[2]s}}]}]}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: split
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: split
endpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %[1]d}}}}]}]
`, port, timeout)
}

// A TP2 set whose route variants cover only env=prod and env=test is
// accepted with default flags, with a warning for clients without env;
// once a real grpc-go client without env is connected, the same kind of
// change is refused, naming that client's group, and nothing is stored.
func TestAutoChecksTP2Split(t *testing.T) {
	p := startXdsd(t)
	be := startBackend(t)
	dir := t.TempDir()
	v1 := writeTemp(t, dir, "split.yaml", tp2Split(be.port, "5s"))
	code, out, errOut := runXdsd(t, "apply", "--admin", p.admin, "-f", v1)
	if code != 0 || !strings.HasPrefix(out, "revision 1:") || !strings.Contains(errOut, "warning: no env: listener split → route split: no variant for these parameters") {
		t.Fatalf("apply with nobody connected: exit %d\n%s%s", code, out, errOut)
	}

	// A prod client is served; a change goes ahead while only it is
	// connected.
	prod := dial(t, "xds:///split", bootstrap(p.xds, nil, map[string]string{"env": "prod"}))
	until(t, prod, be.addr)
	v2 := writeTemp(t, dir, "split.yaml", tp2Split(be.port, "6s"))
	if code, out, errOut := runXdsd(t, "apply", "--admin", p.admin, "-f", v2); code != 0 || !strings.HasPrefix(out, "revision 2:") {
		t.Fatalf("apply with a prod client: exit %d\n%s%s", code, out, errOut)
	}

	// A client without env subscribes to the listener, and waits for a
	// route configuration that has no variant for it.
	bare := dialIdle(t, "xds:///split", nodeBootstrap(p.xds, "bare-1"))
	bare.Connect()
	testutil.Eventually(t, "the client without env subscribes to the listener", func() bool {
		return subscribed(p.clients(t), "bare-1", "split")
	})
	v3 := writeTemp(t, dir, "split.yaml", tp2Split(be.port, "7s"))
	code, out, errOut = runXdsd(t, "apply", "--admin", p.admin, "-f", v3)
	want := "1 connected grpc-go client with no env would wait for route split: listener split → route split: no variant for these parameters"
	if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "nothing was applied") {
		t.Fatalf("apply with a client without env: exit %d\n%s%s\nwant: %s", code, out, errOut, want)
	}
	if code, out, _ := runXdsd(t, "apply", "--admin", p.admin, "--dry-run", "-f", v3); code != 1 ||
		!strings.Contains(out, "group grpc-go no parameters (1 connected) e.g. bare-1") || !strings.Contains(out, "group grpc-go {env=prod} (1 connected)") || !strings.Contains(out, "refuses: ") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	if code, out, errOut := runXdsd(t, "apply", "--admin", p.admin, "--force", "-f", v3); code != 0 || !strings.HasPrefix(out, "revision 3:") || !strings.Contains(errOut, want) {
		t.Errorf("apply --force: exit %d\n%s%s", code, out, errOut)
	}
}

// subscribed reports whether the client with node id subscribes to a
// listener name.
func subscribed(clients []map[string]any, node, listener string) bool {
	for _, c := range clients {
		if c["node_id"] != node {
			continue
		}
		types, _ := c["types"].([]any)
		for _, ty := range types {
			tm, _ := ty.(map[string]any)
			subs, _ := tm["subscriptions"].([]any)
			for _, s := range subs {
				if sm, _ := s.(map[string]any); sm["name"] == listener && strings.Contains(fmt.Sprint(tm["type_url"]), "Listener") {
					return true
				}
			}
		}
	}
	return false
}
