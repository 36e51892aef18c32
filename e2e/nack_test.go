package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
)

// chainYAML is a complete chain a grpc-go client takes for xds:///ID:
// listener, route configuration, cluster and endpoints, all named ID.
func chainYAML(id string, port int) string {
	return fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: %[1]s
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: %[1]s
    rds: {route_config_name: %[1]s, config_source: {ads: {}}}
    http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
---
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: %[1]s
virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: %[1]s}}]}]
---
"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: %[1]s
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
lb_policy: ROUND_ROBIN
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: %[1]s
endpoints:
- locality: {region: r}
  load_balancing_weight: 1
  lb_endpoints:
  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %[2]d}}}
`, id, port)
}

// nackCases break one thing of the chain each, as the gRPC rule of
// internal/clientcheck says a gRPC client refuses; nack is what grpc-go says.
var nackCases = []struct {
	rule, from, to, nack string
}{
	{"grpc/api-listener", `"@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: ID
    rds: {route_config_name: ID, config_source: {ads: {}}}
    http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]`,
		`"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
    stat_prefix: ID
    cluster: ID`, "unexpected http connection manager resource type"},
	{"grpc/rds-source", "config_source: {ads: {}}}\n    http", "config_source: {path_config_source: {path: /r.yaml}}}\n    http", "LDS's RDS configSource is not ADS or Self"},
	{"grpc/route-specifier", "rds: {route_config_name: ID, config_source: {ads: {}}}", "scoped_routes: {name: s, scope_key_builder: {fragments: [{header_value_extractor: {name: x, element_separator: \",\"}}]}, rds_config_source: {ads: {}}, scoped_route_configurations_list: {scoped_route_configurations: [{name: s, route_configuration_name: ID, key: {fragments: [{string_key: a}]}}]}}", "RouteSpecifier"},
	{"grpc/hcm-fields", "stat_prefix: ID\n    rds", "stat_prefix: ID\n    xff_num_trusted_hops: 1\n    rds", "xff_num_trusted_hops must be unset or zero"},
	{"grpc/http-filters", "http_filters: [{name: router", "http_filters: [{name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, {name: router", "no filter implementation found"},
	{"grpc/http-filters", "http_filters: [{name: router", "http_filters: [{name: rbac, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC}}, {name: router", "not supported client-side"},
	{"grpc/http-filters", "http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]", "http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}, {name: fault, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}]", "is a terminal filter but it is not last"},
	{"grpc/http-filters", "http_filters: [{name: router", "http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault}}, {name: router", "duplicate filter name"},
	{"grpc/http-filters", "http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]", "http_filters: [{name: cors, is_optional: true, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}]", "http filters list is empty"},
	{"grpc/server-listener", "api_listener:\n  api_listener:\n    \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n    stat_prefix: ID\n    rds: {route_config_name: ID, config_source: {ads: {}}}\n    http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]",
		"filter_chains: [{filters: [{name: echo, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.echo.v3.Echo}}]}]", "no address field in LDS response"},
	{"grpc/route-match", "match: {prefix: \"\"}", "match: {path_separated_prefix: /a}", "unrecognized path specifier"},
	{"grpc/route-match", "match: {prefix: \"\"}", "match: {safe_regex: {regex: \"/a(?=b)\"}}", "invalid regex"},
	{"grpc/weighted-clusters", "route: {cluster: ID}", "route: {weighted_clusters: {clusters: [{name: ID, weight: 0}]}}", "has no valid cluster in WeightedCluster action"},
	{"grpc/cluster-specifier-plugin", "route: {cluster: ID}", "route: {cluster_specifier_plugin: rls}", "that is not in Route Configuration"},
	{"grpc/retry-policy", "route: {cluster: ID}", "route: {cluster: ID, retry_policy: {num_retries: 0}}", "num_retries = 0; must be >= 1"},
	{"grpc/cluster-type", "type: EDS\neds_cluster_config: {eds_config: {ads: {}}}", "type: STATIC", "unsupported cluster type"},
	{"grpc/cluster-type", "eds_config: {ads: {}}", "eds_config: {path_config_source: {path: /e.yaml}}", "CDS's EDS config source is not ADS or Self"},
	{"grpc/cluster-type", "type: EDS\neds_cluster_config: {eds_config: {ads: {}}}", "type: LOGICAL_DNS\nload_assignment: {cluster_name: ID, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: localhost, port_value: 1}}}}, {endpoint: {address: {socket_address: {address: localhost, port_value: 2}}}}]}]}", "LOGICAL_DNS cluster must have exactly one"},
	{"grpc/lb-policy", "lb_policy: ROUND_ROBIN", "lb_policy: MAGLEV", "unexpected lbPolicy"},
	{"grpc/lb-policy", "lb_policy: ROUND_ROBIN", "lb_policy: RING_HASH\nring_hash_lb_config: {hash_function: MURMUR_HASH_2}", "unsupported ring_hash hash function"},
	{"grpc/cluster-fields", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBIN\nlrs_server: {ads: {}}", "unsupported config_source_specifier"},
	{"grpc/cluster-fields", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBIN\ntransport_socket_matches: [{name: m, transport_socket: {name: raw, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer}}}]", "unsupported transport_socket_matches"},
	{"grpc/endpoints", "- locality: {region: r}", "- load_balancing_weight: 1\n  lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 9}}}}]\n- locality: {region: r}", "locality without ID"},
	{"grpc/endpoints", "  lb_endpoints:\n", "  lb_endpoints:\n  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: PORT}}}\n", "duplicate endpoint with the same address"},
	{"grpc/endpoints", "  load_balancing_weight: 1\n", "  load_balancing_weight: 1\n  priority: 1\n", "priority 0 missing"},
}

// Each gRPC rule of xdsd's client checks is real: the resources it
// refuses are NACKed by the real grpc-go xDS client (the NACK's message,
// as xdsd's admin API shows it, is grpc-go's), and the chain they were
// made from is taken whole and serves an RPC. xdsd validate --client grpc
// refuses each case with that rule, and accepts the chain.
func TestGRPCNacksWhatValidateRefuses(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t)
	dir := t.TempDir()

	good := chainYAML("good", be.port)
	if code, out, errOut := runXdsd(t, "validate", "--client", "grpc", "-f", writeTemp(t, dir, "good.yaml", good)); code != 0 {
		t.Fatalf("validate the chain: exit %d\n%s%s", code, out, errOut)
	}
	x.apply(t, good)
	until(t, dial(t, "xds:///good", nodeBootstrap(x.xds, "good")), be.addr)

	type watch struct {
		id, want string
		conn     *grpc.ClientConn
	}
	var watches []watch
	for i, tc := range nackCases {
		id := fmt.Sprintf("nack%d", i)
		from := strings.ReplaceAll(tc.from, "ID", id)
		to := strings.ReplaceAll(strings.ReplaceAll(tc.to, "ID", id), "PORT", fmt.Sprint(be.port))
		chain := chainYAML(id, be.port)
		if !strings.Contains(chain, from) {
			t.Fatalf("case %d (%s): the chain has no %q", i, tc.rule, from)
		}
		bad := strings.Replace(chain, from, to, 1)
		code, _, errOut := runXdsd(t, "validate", "--client", "grpc", "-f", writeTemp(t, dir, id+".yaml", bad))
		if code != 1 || !strings.Contains(errOut, "["+tc.rule+"]") {
			t.Errorf("case %d: validate --client grpc: exit %d, want a %s finding:\n%s", i, code, tc.rule, errOut)
		}
		x.apply(t, bad) // the admin API without client= checks nothing
		watches = append(watches, watch{id, tc.nack, dialIdle(t, "xds:///"+id, nodeBootstrap(x.xds, id))})
	}
	pending := map[string]string{}
	for _, w := range watches {
		w.conn.Connect() // the resolver starts: LDS, then what the listener names
		pending[w.id] = w.want
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(pending) > 0 {
		for _, c := range x.clients(t) {
			id, _ := c["node_id"].(string)
			want, ok := pending[id]
			if !ok {
				continue
			}
			for _, ty := range c["types"].([]any) {
				if n, ok := ty.(map[string]any)["last_nack"].(map[string]any); ok && strings.Contains(fmt.Sprint(n["error"]), want) {
					delete(pending, id)
				}
			}
		}
		if time.Now().After(deadline) {
			for id, want := range pending {
				t.Errorf("%s: grpc-go never NACKed with %q", id, want)
			}
			b, _ := json.MarshalIndent(x.clients(t), "", " ")
			t.Fatalf("clients:\n%s", b)
		}
	}
}

func writeTemp(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// nodeBootstrap is a bootstrap whose node id is id, so that the client's
// stream can be found among the server's.
func nodeBootstrap(server, id string) []byte {
	var b map[string]any
	json.Unmarshal(bootstrap(server, nil, nil), &b)
	b["node"].(map[string]any)["id"] = id
	out, _ := json.Marshal(b)
	return out
}

// dialIdle builds a grpc-go xDS channel that starts resolving only when
// asked (Connect).
func dialIdle(t *testing.T, target string, bootstrapJSON []byte) *grpc.ClientConn {
	t.Helper()
	r, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
