package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An Envoy front proxy's bootstrap, imported with an authority, applied
// with the few resources it fetched from its old management server (the
// RDS route configuration, the EDS cluster's endpoints) and an API
// listener for a proxyless client, serves a grpc-go client through the
// imported cluster: xdsd import turned its STATIC endpoints into EDS,
// which gRPC requires, and named them as gRPC requires of an xdstp://
// cluster.
func TestImportServesGRPC(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "internal", "envoyimport", "testdata", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bootstrapFile := writeTemp(t, dir, "envoy.yaml", strings.ReplaceAll(string(src), "port_value: 50051", "port_value: "+strconv.Itoa(be.port)))
	out := filepath.Join(dir, "imported")
	if code, stdout, errOut := runXdsd(t, "import", "-o", out, "--authority", "imported", bootstrapFile); code != 0 ||
		!strings.Contains(errOut, "imported 2 listeners, 2 clusters, 1 endpoint set, 1 secret") {
		t.Fatalf("import: exit %d\n%s%s", code, stdout, errOut)
	}
	for _, f := range []string{"listeners.yaml", "clusters.yaml", "endpoints.yaml", "secrets.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if code, _, errOut := runXdsd(t, "import", "-o", out, bootstrapFile); code != 1 || !strings.Contains(errOut, "exists") {
		t.Errorf("import over existing files: exit %d\n%s", code, errOut)
	}
	const (
		cluster = "xdstp://imported/envoy.config.cluster.v3.Cluster/"
		route   = "xdstp://imported/envoy.config.route.v3.RouteConfiguration/"
	)
	writeTemp(t, out, "added.yaml", `# What the old management server sent, and a proxyless client's listener.
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: `+route+`http-routes
virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: `+cluster+`backend}}]}]
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: xdstp://imported/envoy.config.endpoint.v3.ClusterLoadAssignment/api
endpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: `+strconv.Itoa(be.port)+`}}}}]}]
---
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: xdstp://imported/envoy.config.listener.v3.Listener/front
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: front
    rds: {route_config_name: `+route+`http-routes, config_source: {ads: {}}}
    http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`)
	if code, stdout, errOut := runXdsd(t, "validate", "-f", out); code != 0 {
		t.Fatalf("validate the imported files: exit %d\n%s%s", code, stdout, errOut)
	}
	if code, stdout, errOut := runXdsd(t, "apply", "--admin", x.admin, "-f", out); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, errOut)
	}
	until(t, dial(t, "xds://imported/front", bootstrap(x.xds, map[string]string{"imported": ""}, nil)), be.addr)
}
