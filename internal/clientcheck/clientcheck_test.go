package clientcheck

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// check runs a client's checks over YAML documents.
func check(t *testing.T, c RuleSet, src string) []Finding {
	t.Helper()
	docs, err := resource.Decode("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	k := New(c)
	for _, d := range docs {
		k.Add(d)
	}
	return k.Findings()
}

const router = `{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}`

// apiListener is a proxyless client's listener with the given HCM fields.
func apiListener(hcm string) string {
	return `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: s
` + hcm
}

// envoyListener is a listener with an HCM in one filter chain.
func envoyListener(hcm string) string {
	return `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
address: {socket_address: {address: 0.0.0.0, port_value: 80}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
` + hcm
}

// rds is an HCM's inline route configuration, referencing nothing.
const rds = "      route_config: {virtual_hosts: [{name: v, domains: [\"*\"]}]}\n"

func cluster(extra string) string {
	return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n" + extra
}

// rdsListener is a proxyless client's listener whose routes are route
// configuration route, by RDS.
func rdsListener(route string) string {
	return apiListener("    rds: {route_config_name: " + route + ", config_source: {ads: {}}}\n    http_filters: [" + router + "]\n")
}

func routes(vhosts string) string {
	return "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n" + vhosts
}

// okCluster is cluster c and its endpoints, as every client takes them.
const okCluster = "---\n\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n" +
	"---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n"

// Each rule: a resource the client rejects (with the finding expected, by
// rule and a part of its message and where), and the same fixed.
func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		client    RuleSet
		bad, good string
		rule      string
		want      string // part of the finding, its position included
	}{
		{"envoy router not last", Envoy,
			envoyListener("      http_filters:\n      - " + router + "\n      - {name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}\n" + rds),
			envoyListener("      http_filters:\n      - {name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}\n      - " + router + "\n" + rds),
			"envoy/router-last", `t.yaml:11:9: document 1: filter_chains[0].filters[0].typed_config.http_filters[0]: Envoy rejects the listener: HTTP filter "router"`},
		{"envoy last filter not terminal", Envoy,
			envoyListener("      http_filters:\n      - {name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}\n" + rds),
			envoyListener(rds),
			"envoy/router-last", "does not end the chain"},
		{"envoy network filter after HCM", Envoy,
			envoyListener("      http_filters: [" + router + "]\n" + rds + "  - {name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}\n"),
			envoyListener("      http_filters: [" + router + "]\n" + rds),
			"envoy/network-filter-last", "must be the last"},
		{"envoy duplicate filter chain match", Envoy,
			envoyListener("      http_filters: [" + router + "]\n" + rds + "- filter_chain_match: {}\n  filters: [{name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}]\n"),
			envoyListener("      http_filters: [" + router + "]\n" + rds + "- filter_chain_match: {server_names: [a.example]}\n  filters: [{name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}]\n"),
			"envoy/filter-chain-match", "filter chains 0 and 1 match the same connections"},
		{"envoy no filter chains", Envoy,
			"\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: l\naddress: {socket_address: {address: 0.0.0.0, port_value: 80}}\n",
			"\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: l\naddress: {socket_address: {address: 0.0.0.0, port_value: 80}}\ndefault_filter_chain: {filters: [{name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}]}\n",
			"envoy/no-filter-chains", "no filter chains"},
		{"envoy duplicate domain", Envoy,
			routes("- {name: a, domains: [x.example, \"*\"]}\n- {name: b, domains: [X.example]}\n") + okCluster,
			routes("- {name: a, domains: [x.example, \"*\"]}\n- {name: b, domains: [y.example]}\n") + okCluster,
			"envoy/duplicate-domain", `t.yaml:5:23: document 1: virtual_hosts[1].domains[0]: Envoy rejects the route configuration: domain "x.example" is also in virtual host "a"`},
		{"envoy second wildcard vhost", Envoy,
			routes("- {name: a, domains: [\"*\"]}\n- {name: b, domains: [\"*\"]}\n"),
			routes("- {name: a, domains: [\"*\"]}\n- {name: b, domains: [\"*.example\"]}\n"),
			"envoy/duplicate-domain", "Only a single wildcard domain"},
		{"envoy v2 type", Envoy,
			envoyListener("      http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.config.filter.http.router.v2.Router}}]\n" + rds),
			envoyListener("      http_filters: [" + router + "]\n" + rds),
			"envoy/v2-type", "filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.@type: Envoy rejects envoy.config.filter.http.router.v2.Router: it is a v2 API type"},
		{"envoy listener address", Envoy,
			envoyListener(rds) + "---\n" + strings.Replace(envoyListener(rds), "name: l\n", "name: l2\n", 1),
			envoyListener(rds) + "---\n" + strings.Replace(strings.Replace(envoyListener(rds), "name: l\n", "name: l2\n", 1), "port_value: 80", "port_value: 81", 1),
			"envoy/listener-address", "listeners l and l2 both bind tcp 0.0.0.0:80"},
		{"envoy validate_clusters", Envoy,
			envoyListener("      route_config: {virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: nowhere}}]}]}\n"),
			envoyListener("      route_config: {validate_clusters: false, virtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c}}]}]}\n") + "---\n" + cluster("") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n",
			"envoy/validate-clusters", `route: unknown cluster 'nowhere'`},

		{"grpc api listener holds no HCM", GRPC,
			"\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: l\napi_listener: {api_listener: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: s, cluster: c}}\n",
			apiListener("    http_filters: [" + router + "]\n    route_config: {}\n"),
			"grpc/api-listener", "must hold an envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"},
		{"grpc rds not over ads", GRPC,
			apiListener("    http_filters: [" + router + "]\n    rds: {route_config_name: r, config_source: {path_config_source: {path: /r.yaml}}}\n"),
			apiListener("    http_filters: ["+router+"]\n    rds: {route_config_name: r, config_source: {self: {}}}\n") + "\n---\n" + routes("- {name: v, domains: [\"*\"]}\n"),
			"grpc/rds-source", "LDS's RDS configSource is not ADS or Self"},
		{"grpc no http filters", GRPC,
			apiListener("    route_config: {}\n"),
			apiListener("    http_filters: [" + router + "]\n    route_config: {}\n"),
			"grpc/http-filters", "http filters list is empty"},
		{"grpc unsupported filter", GRPC,
			apiListener("    http_filters: [{name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, " + router + "]\n    route_config: {}\n"),
			apiListener("    http_filters: [{name: cors, is_optional: true, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, " + router + "]\n    route_config: {}\n"),
			"grpc/http-filters", `no filter implementation found for "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"`},
		{"grpc server filter on a client", GRPC,
			apiListener("    http_filters: [{name: rbac, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC}}, " + router + "]\n    route_config: {}\n"),
			apiListener("    http_filters: [{name: rbac, is_optional: true, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC}}, " + router + "]\n    route_config: {}\n"),
			"grpc/http-filters", `HTTP filter "rbac" not supported client-side`},
		{"grpc router not last", GRPC,
			apiListener("    http_filters: [" + router + ", {name: fault, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}]\n    route_config: {}\n"),
			apiListener("    http_filters: [{name: fault, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}, " + router + "]\n    route_config: {}\n"),
			"grpc/http-filters", "is a terminal filter but it is not last"},
		{"grpc duplicate filter name", GRPC,
			apiListener("    http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}, " + router + "]\n    route_config: {}\n"),
			apiListener("    http_filters: [{name: fault, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}, " + router + "]\n    route_config: {}\n"),
			"grpc/http-filters", "duplicate filter name"},
		{"grpc server listener without address", GRPC,
			"\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: l\nfilter_chains: [{filters: [{name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}]}]\n",
			apiListener("    http_filters: [" + router + "]\n    route_config: {}\n"),
			"grpc/server-listener", "no address field in LDS response"},
		{"grpc path separated prefix", GRPC,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {path_separated_prefix: /a}, route: {cluster: c}}]}\n") + okCluster,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /a}, route: {cluster: c}}]}\n") + okCluster,
			"grpc/route-match", "unrecognized path specifier"},
		{"grpc regex not RE2", GRPC,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {safe_regex: {regex: \"/a(?=b)\"}}, route: {cluster: c}}]}\n") + okCluster,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {safe_regex: {regex: \"/a(b)\"}}, route: {cluster: c}}]}\n") + okCluster,
			"grpc/route-match", "invalid regex"},
		{"grpc weighted clusters of weight zero", GRPC,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {weighted_clusters: {clusters: [{name: c, weight: 0}]}}}]}\n") + okCluster,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {weighted_clusters: {clusters: [{name: c, weight: 1}]}}}]}\n") + okCluster,
			"grpc/weighted-clusters", "has no valid cluster in WeightedCluster action"},
		{"grpc retry without retries", GRPC,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c, retry_policy: {num_retries: 0}}}]}\n") + okCluster,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c, retry_policy: {num_retries: 2}}}]}\n") + okCluster,
			"grpc/retry-policy", "num_retries must be at least 1"},
		{"grpc static cluster", GRPC,
			"\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\ntype: STATIC\n",
			cluster("") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n",
			"grpc/cluster-type", "STATIC clusters are not supported"},
		{"grpc lb policy", GRPC,
			cluster("lb_policy: MAGLEV\n"),
			cluster("lb_policy: RING_HASH\n") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n",
			"grpc/lb-policy", "unexpected lbPolicy MAGLEV"},
		{"grpc eds not over ads", GRPC,
			strings.Replace(cluster(""), "{eds_config: {ads: {}}}", "{eds_config: {path_config_source: {path: /e.yaml}}}", 1),
			cluster("") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n",
			"grpc/cluster-type", "CDS's EDS config source is not ADS or Self"},
		{"grpc xdstp cluster without service name", GRPC,
			strings.Replace(cluster(""), "name: c\n", "name: xdstp://a/envoy.config.cluster.v3.Cluster/c\n", 1),
			strings.Replace(cluster(""), "name: c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}", "name: xdstp://a/envoy.config.cluster.v3.Cluster/c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}, service_name: xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/c}", 1) + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: xdstp://a/envoy.config.endpoint.v3.ClusterLoadAssignment/c\n",
			"grpc/cluster-type", "CDS's EDS service name is not set with a new-style cluster name"},
		{"grpc duplicate endpoint", GRPC,
			"\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\nendpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]\n",
			"\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\nendpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 2}}}}]}]\n",
			"grpc/endpoints", "duplicate endpoint with the same address"},
		{"grpc locality without weight", GRPC,
			"\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\nendpoints: [{locality: {}, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]\n",
			"\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\nendpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]}]\n",
			"grpc/locality-weight", "gRPC ignores this locality"},
		{"grpc dangling cluster", GRPC,
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c}}]}\n"),
			routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c}}]}\n") + "---\n" + cluster("") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n",
			"refs/dangling", "t.yaml:4:76: document 1: virtual_hosts[0].routes[0].route.cluster: route r → cluster c: no such cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			hit := false
			for _, f := range check(t, tc.client, tc.bad) {
				got = append(got, f.String())
				if f.Rule == tc.rule && strings.Contains(f.DocError.Error(), tc.want) {
					hit = true
				}
			}
			if !hit {
				t.Errorf("no %s finding with %q; got:\n%s", tc.rule, tc.want, strings.Join(got, "\n"))
			}
			for _, f := range check(t, tc.client, tc.good) {
				if f.Severity == Error {
					t.Errorf("the fixed case: %s", f)
				}
			}
		})
	}
}

// Against a store, only what the batch does is reported: a stored route
// that already pointed nowhere is not this batch's problem, but replacing
// a cluster's variants so that a stored route's clients lose it is.
func TestStoredResources(t *testing.T) {
	decode := func(src string) []*resource.Document {
		docs, err := resource.Decode("t.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return docs
	}
	stored := decode(routes("- {name: v, domains: [\"*\"], routes: [{match: {prefix: /}, route: {cluster: c}}, {match: {prefix: /x}, route: {cluster: gone}}]}\n") + okCluster + "---\n" + rdsListener("r"))
	batch := decode("constraints: env=prod\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n  type: EDS\n  eds_cluster_config: {eds_config: {ads: {}}}\n")
	for _, tc := range []struct {
		groups []Group
		want   string
	}{
		{nil, "route r: warning: no env: route r → cluster c: no variant for these parameters (a gRPC client is told it does not exist, and its RPCs fail); no client is connected and none is declared (--fleet): a refusal only for parameter sets a client has [refs/dangling]"},
		{[]Group{{Agent: "grpc-go", Params: constraint.Params{"env": "prod"}, Count: 3}}, "route r: warning: no env: route r → cluster c: no variant for these parameters (no connected or declared client has these parameters) [refs/dangling]"},
		{[]Group{{Agent: "grpc-go", Count: 2}}, "route r: 2 connected grpc-go clients with no env would wait for cluster c: route r → cluster c: no variant for these parameters (a gRPC client is told it does not exist, and its RPCs fail) [refs/dangling]"},
	} {
		k := NewFleet(GRPC, tc.groups)
		for _, d := range batch {
			k.Add(d)
		}
		for _, d := range stored {
			k.AddStored(Summarize(d.Variant, d.Message))
		}
		var got []string
		for _, f := range k.Findings() {
			got = append(got, f.String())
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("groups %v: findings:\n%s\nwant:\n%s", tc.groups, strings.Join(got, "\n"), tc.want)
		}
	}
}

// Variants of two listeners on one address conflict only where one client
// can get both.
func TestListenerAddressPerParameterSet(t *testing.T) {
	l := func(name, cons string) string {
		return "constraints: " + cons + "\nresource:\n" + indent(strings.Replace(envoyListener(rds), "name: l\n", "name: "+name+"\n", 1))
	}
	if fs := check(t, Envoy, l("a", "env=prod")+"---\n"+l("b", "env!=prod")); len(fs) != 0 {
		t.Errorf("disjoint variants conflict: %v", fs)
	}
	fs := check(t, Envoy, l("a", "env=prod")+"---\n"+l("b", "exists(env)"))
	if len(fs) != 1 || !strings.Contains(fs[0].Msg, "for clients with {env=prod}") {
		t.Errorf("overlapping variants: %v", fs)
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}
