package refs

import (
	"sort"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// set decodes YAML documents into a Set.
func set(t *testing.T, src string) *Set {
	t.Helper()
	docs, err := resource.Decode("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var s Set
	for _, d := range docs {
		s.Add(&Entry{Type: d.Variant.Type.URL, Name: d.Variant.Name, Constraints: d.Variant.Constraints, Refs: Of(d.Message), Loc: d.Location})
	}
	return &s
}

const listener = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
address: {socket_address: {address: 0.0.0.0, port_value: 443}}
listener_filters:
- name: ecds-lf
  config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector]}
filter_chains:
- transport_socket:
    name: tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context:
        tls_certificate_sds_secret_configs:
        - {name: cert, sds_config: {ads: {}}}
        - {name: elsewhere, sds_config: {api_config_source: {api_type: GRPC, grpc_services: [{envoy_grpc: {cluster_name: sds}}]}}}
  filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
      rds: {route_config_name: r, config_source: {ads: {}}}
      http_filters:
      - name: authz
        config_discovery: {config_source: {ads: {}}, type_urls: [type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz]}
      - name: router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
- filters:
  - name: inline
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
      route_config:
        virtual_hosts:
        - name: v
          domains: ["*"]
          routes:
          - match: {prefix: /}
            route:
              weighted_clusters: {clusters: [{name: w1, weight: 1}, {name: "xdstp://b/envoy.config.cluster.v3.Cluster/w2?y=1&x=2", weight: 1}]}
              request_mirror_policies: [{cluster: m}]
      http_filters:
      - name: router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  - name: tcp
    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: t}
`

func TestOf(t *testing.T) {
	s := set(t, listener+`---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: c
type: EDS
eds_cluster_config: {eds_config: {ads: {}}, service_name: c-eds}
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: agg
cluster_type:
  name: envoy.clusters.aggregate
  typed_config: {"@type": type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig, clusters: [c, d]}
---
type: cds
name: xdstp://a/envoy.config.cluster.v3.Cluster/old
resource: {"@type": type.googleapis.com/xds.core.v3.ResourceLocator, authority: a, resource_type: envoy.config.cluster.v3.Cluster, id: new}
`)
	var got []string
	for _, e := range s.Entries() {
		for _, r := range e.Refs {
			got = append(got, e.Name+" "+r.Path+" → "+Kind(r.Type)+" "+r.Name+map[bool]string{true: " (strict)"}[r.Strict])
		}
	}
	want := []string{
		"l filter_chains[0].filters[0].typed_config.rds.route_config_name → route r",
		"l filter_chains[0].filters[0].typed_config.http_filters[0].name → extension config authz",
		"l filter_chains[0].transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0].name → secret cert",
		"l filter_chains[1].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.weighted_clusters.clusters[0].name → cluster w1 (strict)",
		"l filter_chains[1].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1].name → cluster xdstp://b/envoy.config.cluster.v3.Cluster/w2?x=2&y=1 (strict)",
		"l filter_chains[1].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.request_mirror_policies[0].cluster → cluster m (strict)",
		"l filter_chains[1].filters[1].typed_config.cluster → cluster t",
		"l listener_filters[0].name → extension config ecds-lf",
		"c eds_cluster_config.service_name → endpoints c-eds",
		"agg cluster_type.typed_config.clusters[0] → cluster c",
		"agg cluster_type.typed_config.clusters[1] → cluster d",
		"xdstp://a/envoy.config.cluster.v3.Cluster/old  → cluster xdstp://a/envoy.config.cluster.v3.Cluster/new",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("references:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tp2 is the TP2 example's chain with one mistake: the variant for
// env=prod, version=v2 routes to a cluster that does not exist.
const tp2 = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
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
name: c-v1
constraints: version=v1
resource: {"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment}
`

// Every parameter set the variants tell apart is tried, following the
// chain from what clients ask for: the one mistake is reported with the
// parameter set that hits it. Envoy, which fetches every cluster, also
// meets the gap in c-v1's endpoints (they exist only for version=v1); a
// gRPC client reaches c-v1 only through the route for version=v1.
func TestDanglingPerParameterSet(t *testing.T) {
	s := set(t, tp2)
	for _, tc := range []struct {
		wildcard []string
		want     []string
	}{
		{nil, []string{"env=prod, version=v2: route tp2 → cluster c-v2: no such cluster"}},
		{[]string{resource.ListenerURL, resource.ClusterURL}, []string{
			"no version; version=v2: cluster c-v1 → endpoints c-v1: no variant for these parameters",
			"env=prod, version=v2: route tp2 → cluster c-v2: no such cluster",
		}},
	} {
		var got []string
		for _, d := range s.Dangling(tc.wildcard...) {
			got = append(got, d.String())
		}
		sort.Strings(got)
		sort.Strings(tc.want)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("wildcard %v, dangling:\n%s\nwant:\n%s", tc.wildcard, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
	if n := len(s.ParamSets()); n != 6 {
		t.Errorf("%d parameter sets, want 6 (env unset or prod, times version unset, v1 or v2)", n)
	}
}

// Resolve draws the chain a client resolves, and another authority's
// names are left to it.
func TestResolve(t *testing.T) {
	s := set(t, tp2+`---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: xdstp://a/envoy.config.cluster.v3.Cluster/agg
cluster_type:
  name: envoy.clusters.aggregate
  typed_config: {"@type": type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig, clusters: [c-v1, "xdstp://elsewhere/envoy.config.cluster.v3.Cluster/x", xdstp://a/envoy.config.cluster.v3.Cluster/agg]}
`)
	got := s.Resolve(resource.ListenerURL, "tp2", constraint.Params{"env": "prod", "version": "v1"}).String()
	want := `listener tp2
  api_listener.api_listener.rds.route_config_name → route tp2 [env=prod && version=v1]
    virtual_hosts[0].routes[0].route.cluster → cluster c-v1
      name → endpoints c-v1 [version=v1]
`
	if got != want {
		t.Errorf("chain:\n%s\nwant:\n%s", got, want)
	}
	got = s.Resolve(resource.ClusterURL, "xdstp://a/envoy.config.cluster.v3.Cluster/agg", nil).String()
	want = `cluster xdstp://a/envoy.config.cluster.v3.Cluster/agg
  cluster_type.typed_config.clusters[0] → cluster c-v1
    name → endpoints c-v1: none
  cluster_type.typed_config.clusters[1] → cluster xdstp://elsewhere/envoy.config.cluster.v3.Cluster/x (another authority)
  cluster_type.typed_config.clusters[2] → cluster xdstp://a/envoy.config.cluster.v3.Cluster/agg (above)
`
	if got != want {
		t.Errorf("chain:\n%s\nwant:\n%s", got, want)
	}
}

// Uncovered lists the parameter sets a resource's variants leave without
// a variant (the guard rail an apply or delete can show); a key tested
// only for existence stands for every value.
func TestUncovered(t *testing.T) {
	s := set(t, `name: c
constraints: exists(region) && env=prod
resource: {"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment}
---
name: c
constraints: "!exists(region) && env=prod"
resource: {"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment}
`)
	var got []string
	for _, p := range s.Uncovered(resource.EndpointURL, "c") {
		got = append(got, describeParams(p, []string{"env", "region"}))
	}
	if want := "no env, no region; no env, region set"; strings.Join(got, "; ") != want {
		t.Errorf("uncovered: %s, want %s", strings.Join(got, "; "), want)
	}
	if s.Uncovered(resource.EndpointURL, "nothing") != nil {
		t.Error("a resource with no variants has no gaps to report")
	}
}
