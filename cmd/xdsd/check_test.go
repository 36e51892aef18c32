package main

import (
	"strings"
	"testing"
)

// tp2Batch is the TP2 example's chain with one mistake: the variant for
// env=prod, version=v2 routes to a cluster that does not exist.
const tp2Batch = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: tp2
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: tp2
    rds: {route_config_name: tp2, config_source: {ads: {}}}
    http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
---
name: tp2
constraints: "!(env=prod && (version=v1 || version=v2))"
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c-default}}]}]}
---
name: tp2
constraints: env=prod && version=v1
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c-v1}}]}]}
---
name: tp2
constraints: env=prod && version=v2
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c-v2}}]}]}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: c-default
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: c-v1
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: c-default
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: c-v1
`

// validate follows the chain for every parameter set the variants tell
// apart and names the one that hits the missing cluster, where the
// reference is written.
func TestValidatePerParameterSet(t *testing.T) {
	p := writeFile(t, t.TempDir(), "tp2.yaml", tp2Batch)
	for _, client := range []string{"envoy", "grpc"} {
		code, out, errOut := runCmd(t, "validate", "--client", client, "-f", p)
		want := "tp2.yaml:20:173: document 4: resource.virtual_hosts[0].routes[0].route.cluster (route tp2 [env=prod && version=v2]): env=prod, version=v2: route tp2 → cluster c-v2: no such cluster"
		if code != 1 || out != "" || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 2 {
			t.Errorf("--client %s: exit %d\n%s%s\nwant:\n%s", client, code, out, errOut, want)
		}
	}
	fixed := writeFile(t, t.TempDir(), "tp2.yaml", strings.Replace(tp2Batch, "cluster: c-v2", "cluster: c-v1", 1))
	code, out, errOut := runCmd(t, "validate", "-f", fixed)
	if code != 0 || out != "ok: 6 resources (8 variants); checked for Envoy across 6 parameter sets\n" {
		t.Errorf("fixed: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "validate", "--client", "none", "-f", p); code != 0 || out != "ok: 6 resources (8 variants)\n" {
		t.Errorf("--client none: exit %d %s", code, out)
	}
	if code, _, _ := runCmd(t, "validate", "--client", "curl", "-f", p); code != 2 {
		t.Errorf("--client curl: exit %d, want 2", code)
	}
}

// apply checks the batch with what the store holds: a route to a stored
// cluster is fine, one to a cluster nowhere is refused (nothing applied)
// unless forced, and then reported.
func TestApplyChecksWithStore(t *testing.T) {
	_, adm := startServe(t)
	dir := t.TempDir()
	base := writeFile(t, dir, "base.yaml", tp2Batch[strings.Index(tp2Batch, "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster"):])
	if code, out, errOut := runCmd(t, "apply", "--admin", adm, "-f", base); code != 0 {
		t.Fatalf("apply clusters: exit %d\n%s%s", code, out, errOut)
	}
	good := writeFile(t, dir, "route.yaml", "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: \"\"}, route: {cluster: c-v1}}]}]\n")
	if code, out, errOut := runCmd(t, "apply", "--admin", adm, "--client", "grpc", "-f", good); code != 0 || !strings.HasPrefix(out, "revision 2:") {
		t.Fatalf("apply route to a stored cluster: exit %d\n%s%s", code, out, errOut)
	}
	bad := writeFile(t, dir, "route.yaml", "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: \"\"}, route: {cluster: nowhere}}]}]\n")
	code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", bad)
	want := "route.yaml:3:91: document 1: virtual_hosts[0].routes[0].route.cluster (route r): route r → cluster nowhere: no such cluster (Envoy waits for it: requests that need it fail) [refs/dangling]"
	if code != 1 || !strings.Contains(errOut, "1 problem(s) Envoy would reject or wait for in vain; nothing was applied") || !strings.Contains(errOut, want) {
		t.Fatalf("apply a dangling route: exit %d\n%s\nwant:\n%s", code, errOut, want)
	}
	if l := listResources(t, adm, ""); l.Revision != 2 {
		t.Fatalf("a refused apply changed the store: revision %d", l.Revision)
	}
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--force", "-f", bad)
	if code != 0 || !strings.HasPrefix(out, "revision 3:") || !strings.Contains(errOut, want) {
		t.Fatalf("apply --force: exit %d\n%s%s", code, out, errOut)
	}
	// A gRPC check of a cluster type gRPC lacks.
	static := writeFile(t, dir, "static.yaml", "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: s\ntype: STATIC\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "grpc", "-f", static); code != 1 || !strings.Contains(errOut, "static.yaml:3:7: document 1: type (cluster s): gRPC rejects the cluster: STATIC clusters are not supported") {
		t.Errorf("apply --client grpc STATIC: exit %d\n%s", code, errOut)
	}
}
