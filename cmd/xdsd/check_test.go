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
// reference is written: a warning while no client has those parameters,
// a refusal naming the group once the fleet declares one.
func TestValidatePerParameterSet(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "tp2.yaml", tp2Batch)
	want := "tp2.yaml:20:173: document 4: resource.virtual_hosts[0].routes[0].route.cluster (route tp2 [env=prod && version=v2]): warning: env=prod, version=v2: route tp2 → cluster c-v2: no such cluster"
	for _, client := range []string{"auto", "envoy", "grpc"} {
		code, out, errOut := runCmd(t, "validate", "--client", client, "-f", p)
		if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("--client %s: exit %d\n%s%s\nwant:\n%s", client, code, out, errOut, want)
		}
	}
	fleet := writeFile(t, dir, "fleet.yaml", "clients:\n- {agent: envoy, params: {env: prod, version: v1}}\n- {agent: grpc-java, params: {env: prod, version: v2}}\n")
	code, out, errOut := runCmd(t, "validate", "--fleet", fleet, "-f", p)
	want = "tp2.yaml:20:173: document 4: resource.virtual_hosts[0].routes[0].route.cluster (route tp2 [env=prod && version=v2]): declared grpc-java clients with env=prod, version=v2 would wait for cluster c-v2: route tp2 → cluster c-v2: no such cluster [refs/dangling]"
	if code != 1 || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "xdsd validate: 1 problem(s) the connected or declared clients would reject or wait for in vain") {
		t.Errorf("--fleet: exit %d\n%s%s\nwant:\n%s", code, out, errOut, want)
	}
	fixed := writeFile(t, t.TempDir(), "tp2.yaml", strings.Replace(tp2Batch, "cluster: c-v2", "cluster: c-v1", 1))
	code, out, errOut = runCmd(t, "validate", "--fleet", fleet, "-f", fixed)
	if code != 0 || out != "ok: 6 resources (8 variants); checked for 2 client groups (envoy, grpc-java) across 6 parameter sets\n" {
		t.Errorf("fixed: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "validate", "--client", "none", "-f", p); code != 0 || out != "ok: 6 resources (8 variants)\n" {
		t.Errorf("--client none: exit %d %s", code, out)
	}
	if code, _, _ := runCmd(t, "validate", "--client", "curl", "-f", p); code != 2 {
		t.Errorf("--client curl: exit %d, want 2", code)
	}
}

// A --fleet file that is not what it should be is refused with its file,
// line and column, and what to write.
func TestFleetFileErrors(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "ok.yaml", okCluster)
	for _, tc := range []struct{ fleet, want string }{
		{"clients:\n- {agent: envoy}\n- {agent: nginx}\n", `f.yaml:3:11: clients[1].agent: unknown agent "nginx": want one of envoy, grpc, grpc-go, grpc-java, grpc-js, grpc-cpp, xdsd, other`},
		{"clients:\n- {params: {env: prod}}\n", "f.yaml:2:3: clients[0]: no agent"},
		{"clients:\n- {agent: envoy, params: [env]}\n", "f.yaml:2:26: clients[0].params: want a mapping of parameter names to values"},
		{"clients:\n- {agent: envoy, params: {env: {a: b}}}\n", "f.yaml:2:32: clients[0].params.env: want a value such as prod"},
		{"client:\n- {agent: envoy}\n", `f.yaml:1:1: client: unknown field (want "clients")`},
		{"clients: envoy\n", "f.yaml:1:10: clients: want a mapping with \"clients\""},
		{"clients:\n- {agent: envoy, zone: a}\n", `f.yaml:2:18: clients[0].zone: unknown field (want "agent" and "params")`},
		{"clients: [\n", "f.yaml:1: did not find expected node content"},
	} {
		f := writeFile(t, dir, "f.yaml", tc.fleet)
		code, _, errOut := runCmd(t, "validate", "--fleet", f, "-f", p)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d %s\nwant %s", tc.fleet, code, errOut, tc.want)
		}
	}
}

// okCluster is an EDS cluster and its endpoints.
const okCluster = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: ok\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: ok\n"

// apply checks the batch with what the store holds: a route to a stored
// cluster is fine; one to a cluster nowhere is a warning while no client
// is connected or declared, and refused (nothing applied) for a declared
// fleet unless forced, and then reported.
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
	fleet := writeFile(t, dir, "fleet.yaml", "clients: [{agent: envoy}]\n")
	code, _, errOut := runCmd(t, "apply", "--admin", adm, "--fleet", fleet, "-f", bad)
	want := "route.yaml:3:91: document 1: virtual_hosts[0].routes[0].route.cluster (route r): declared envoy clients would wait for cluster nowhere: route r → cluster nowhere: no such cluster [refs/dangling]"
	if code != 1 || !strings.Contains(errOut, "1 problem(s) the connected or declared clients would reject or wait for in vain; nothing was applied") || !strings.Contains(errOut, want) {
		t.Fatalf("apply a dangling route: exit %d\n%s\nwant:\n%s", code, errOut, want)
	}
	if l := listResources(t, adm, ""); l.Revision != 2 {
		t.Fatalf("a refused apply changed the store: revision %d", l.Revision)
	}
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--fleet", fleet, "--force", "-f", bad)
	if code != 0 || !strings.HasPrefix(out, "revision 3:") || !strings.Contains(errOut, want) {
		t.Fatalf("apply --force: exit %d\n%s%s", code, out, errOut)
	}
	// Without a fleet, the same is a warning.
	bad2 := writeFile(t, dir, "route2.yaml", strings.Replace("\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r2\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: \"\"}, route: {cluster: nowhere}}]}]\n", "nowhere", "elsewhere", 1))
	code, out, errOut = runCmd(t, "apply", "--admin", adm, "-f", bad2)
	if code != 0 || !strings.HasPrefix(out, "revision 4:") || !strings.Contains(errOut, "(route r2): warning: route r2 → cluster elsewhere: no such cluster") {
		t.Fatalf("apply a dangling route without a fleet: exit %d\n%s%s", code, out, errOut)
	}
	// A gRPC check of a cluster type gRPC lacks.
	static := writeFile(t, dir, "static.yaml", "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: s\ntype: STATIC\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "grpc", "-f", static); code != 1 || !strings.Contains(errOut, "static.yaml:3:7: document 1: type (cluster s): gRPC rejects the cluster: STATIC clusters are not supported") {
		t.Errorf("apply --client grpc STATIC: exit %d\n%s", code, errOut)
	}
}
