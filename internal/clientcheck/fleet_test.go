package clientcheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// tp2Split is a listener without constraints whose route configuration
// has variants for env=prod and env=test only: a client without env gets
// the listener and waits for the route.
const tp2Split = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
api_listener:
  api_listener:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: s
    rds: {route_config_name: tp2, config_source: {ads: {}}}
    http_filters: [` + router + `]
---
name: tp2
constraints: env=prod
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c}}]}]}
---
name: tp2
constraints: env=test
resource: {"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration, virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c}}]}]}
` + okCluster

// checkFleet runs the checks of a fleet over YAML documents.
func checkFleet(t *testing.T, c RuleSet, groups []Group, src string) []Finding {
	t.Helper()
	docs, err := resource.Decode("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	k := NewFleet(c, groups)
	for _, d := range docs {
		k.Add(d)
	}
	return k.Findings()
}

func errorsOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Severity == Error {
			out = append(out, f.String())
		}
	}
	return out
}

// "env unset" is a parameter set only when a client without env is
// connected or declared; then the refusal names its group.
func TestTP2WithoutUnsetClients(t *testing.T) {
	prod := Group{Agent: "grpc-go", Params: constraint.Params{"env": "prod", "zone": "a"}, Count: 7, Samples: []string{"n1"}}
	for _, tc := range []struct {
		name   string
		groups []Group
		want   string // the one error; "" for none
	}{
		{"no fleet", nil, ""},
		{"prod and test clients", []Group{prod, {Agent: "envoy", Params: constraint.Params{"env": "test"}, Count: 2}}, ""},
		{"a client without env", []Group{prod, {Agent: "grpc-go", Params: constraint.Params{"zone": "b"}, Count: 1, Samples: []string{"n9"}}},
			"t.yaml:7:30: document 1: api_listener.api_listener.rds.route_config_name (listener l): 1 connected grpc-go client with no env would wait for route tp2: listener l → route tp2: no variant for these parameters [refs/dangling]"},
		{"declared without env", []Group{{Agent: "envoy", Declared: true}},
			"t.yaml:7:30: document 1: api_listener.api_listener.rds.route_config_name (listener l): declared envoy clients with no env would wait for route tp2: listener l → route tp2: no variant for these parameters [refs/dangling]"},
		{"a value no variant mentions", []Group{{Agent: "grpc-java", Params: constraint.Params{"env": "staging"}, Count: 12}},
			"t.yaml:7:30: document 1: api_listener.api_listener.rds.route_config_name (listener l): 12 connected grpc-java clients with env=staging would wait for route tp2: listener l → route tp2: no variant for these parameters [refs/dangling]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := checkFleet(t, Auto, tc.groups, tp2Split)
			errs := errorsOf(fs)
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Errorf("refused:\n%s", strings.Join(errs, "\n"))
			case tc.want != "" && (len(errs) != 1 || errs[0] != tc.want):
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(errs, "\n"), tc.want)
			}
			if tc.groups == nil {
				if len(fs) != 1 || !strings.Contains(fs[0].String(), "warning: no env: listener l → route tp2") {
					t.Errorf("without a fleet, want one warning; got %v", fs)
				}
			}
		})
	}
}

// The message names the group and its count, over the keys that matter.
func TestDanglingNamesGroup(t *testing.T) {
	src := `"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: r
virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: ""}, route: {cluster: c}}]}]
---
name: c
constraints: env=test && version=v3
resource: {"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: c, type: EDS, eds_cluster_config: {eds_config: {ads: {}}}}
---
name: c
constraints: env=prod && version=v3
resource: {"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: c, type: EDS, eds_cluster_config: {eds_config: {ads: {}}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: c
---
` + rdsListener("r")
	groups := []Group{
		{Agent: "grpc-go", Params: constraint.Params{"env": "test", "version": "v4", "zone": "a"}, Count: 5},
		{Agent: "grpc-go", Params: constraint.Params{"env": "test", "version": "v4", "zone": "b"}, Count: 7},
		{Agent: "grpc-go", Params: constraint.Params{"env": "test", "version": "v3"}, Count: 3},
	}
	errs := errorsOf(checkFleet(t, Auto, groups, src))
	want := "12 connected grpc-go clients with env=test, version=v4 would wait for cluster c: route r → cluster c: no variant for these parameters"
	if len(errs) != 1 || !strings.Contains(errs[0], want) {
		t.Errorf("errors:\n%s\nwant one with:\n%s", strings.Join(errs, "\n"), want)
	}
}

// grpc-go 1.85 NACKs every lb_policy but ROUND_ROBIN, RING_HASH and
// LEAST_REQUEST (internal/xds/xdsclient/xdsresource/unmarshal_cds.go,
// "unexpected lbPolicy"), load_balancing_policy or not: a MAGLEV cluster
// is refused for a gRPC fleet, not for an Envoy one.
func TestMaglevForGRPC(t *testing.T) {
	src := cluster("lb_policy: MAGLEV\n") + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n"
	withPolicy := cluster("lb_policy: MAGLEV\nload_balancing_policy: {policies: [{typed_extension_config: {name: rr, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin}}}]}\n") +
		"---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n"
	grpcFleet := []Group{{Agent: "grpc-go", Count: 4}}
	for _, tc := range []struct {
		name   string
		c      RuleSet
		groups []Group
		src    string
		refuse bool
	}{
		{"gRPC fleet", Auto, grpcFleet, src, true},
		{"gRPC fleet, load_balancing_policy set", Auto, grpcFleet, withPolicy, true},
		{"Envoy fleet", Auto, []Group{{Agent: "envoy", Count: 4}}, src, false},
		{"no fleet: a warning", Auto, nil, src, false},
		{"--client grpc", GRPC, nil, src, true},
		{"--client envoy", Envoy, nil, src, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := errorsOf(checkFleet(t, tc.c, tc.groups, tc.src))
			refused := len(errs) == 1 && strings.Contains(errs[0], "unexpected lbPolicy MAGLEV") && strings.Contains(errs[0], "[grpc/lb-policy]")
			if refused != tc.refuse || (!tc.refuse && len(errs) > 0) {
				t.Errorf("errors (refusal wanted: %v):\n%s", tc.refuse, strings.Join(errs, "\n"))
			}
			if tc.groups != nil && tc.refuse && !strings.Contains(errs[0], "(4 connected grpc-go clients get it)") {
				t.Errorf("the refusal does not name the group: %s", errs[0])
			}
		})
	}
}

// A NACK in a variant no client of that rule set gets is a warning once
// the fleet is known.
func TestNackOnlyForClientsThatGetIt(t *testing.T) {
	src := "constraints: env=test\nresource:\n" + indent(cluster("lb_policy: MAGLEV\n")) + "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\n"
	fs := checkFleet(t, Auto, []Group{{Agent: "grpc-go", Params: constraint.Params{"env": "prod"}, Count: 4}}, src)
	if errs := errorsOf(fs); len(errs) > 0 || len(fs) != 1 || !strings.Contains(fs[0].String(), "warning: ") || !strings.Contains(fs[0].String(), "no connected or declared gRPC client gets this variant") {
		t.Errorf("findings: %v", fs)
	}
}

// Clusters applied before their endpoints are warned about, whoever is
// connected.
func TestEndpointsPending(t *testing.T) {
	for _, groups := range [][]Group{nil, {{Agent: "envoy", Count: 1}}, {{Agent: "grpc-go", Count: 1}}} {
		fs := checkFleet(t, Auto, groups, cluster(""))
		if len(fs) != 1 || fs[0].Severity != Warning || fs[0].Rule != "refs/endpoints-pending" {
			t.Errorf("groups %v: %v", groups, fs)
		}
	}
}

// Without a fleet, auto reports each rule set's problems, labelled:
// Envoy's refuse, gRPC's warn (a bare cluster is STATIC, which gRPC
// NACKs).
func TestAutoWithoutFleetLabels(t *testing.T) {
	src := "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: s\nlb_policy: MAGLEV\n---\n" + envoyListener("") + "      http_filters: [" + router + ", {name: cors, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}]\n      route_config: {}\n"
	var rules []string
	for _, f := range checkFleet(t, Auto, nil, src) {
		rules = append(rules, fmt.Sprintf("%s %s %v", f.RuleSet, f.Rule, f.Severity == Error))
	}
	want := "Envoy envoy/router-last true,Envoy envoy/router-last true,gRPC grpc/lb-policy false,gRPC grpc/cluster-type false,gRPC grpc/http-filters false"
	if got := strings.Join(rules, ","); got != want {
		t.Errorf("findings:\n%s\nwant:\n%s", got, want)
	}
}

// mesh is n route configurations, clusters and endpoints, each route to
// its cluster, in one batch.
func mesh(n int) []*resource.Document {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\n\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r%d\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: \"\"}, route: {cluster: c%d}}]}]\n", i, i)
		fmt.Fprintf(&b, "---\n\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c%d\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n", i)
		fmt.Fprintf(&b, "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c%d\nendpoints: [{locality: {}, load_balancing_weight: 1, lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: %d}}}}]}]\n", i, 1000+i)
	}
	docs, err := resource.Decode("mesh.yaml", []byte(b.String()))
	if err != nil {
		panic(err)
	}
	return docs
}

// The checks for both rule sets share one reference index: checking for
// Envoy and gRPC at once costs about what checking for one does, not
// twice (go test -bench Checker -benchmem ./internal/clientcheck).
func BenchmarkChecker(b *testing.B) {
	docs := mesh(2000)
	fleet := []Group{{Agent: "envoy", Count: 100}, {Agent: "grpc-go", Count: 100}}
	for _, tc := range []struct {
		name   string
		c      RuleSet
		groups []Group
	}{
		{"envoy", Envoy, nil},
		{"grpc", GRPC, nil},
		{"auto-both", Auto, fleet},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				k := NewFleet(tc.c, tc.groups)
				for _, d := range docs {
					k.Add(d)
				}
				if fs := k.Findings(); len(fs) != 0 {
					b.Fatalf("findings: %v", fs)
				}
			}
		})
	}
}
