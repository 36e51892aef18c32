package envoyimport

import (
	"os"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func load(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	data, err := os.ReadFile("testdata/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := resource.DecodeMessage("testdata/envoy.yaml", data, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// A front proxy's bootstrap (TLS listener with tls_inspector and SNI, an
// HCM with several filters, a STATIC and an EDS cluster, a secret,
// Envoy's !ignore anchors) becomes documents that decode and that Envoy
// would take, but for what the bootstrap does not hold (the EDS cluster's
// endpoints, the RDS route configuration), which the notes name. With an
// authority every name is an xdstp:// name and the references follow.
func TestConvert(t *testing.T) {
	for _, auth := range []string{"", "imported"} {
		t.Run("authority="+auth, func(t *testing.T) {
			n := func(typ, name string) string {
				if auth == "" {
					return name
				}
				return "xdstp://" + auth + "/" + typ + "/" + name
			}
			res, err := Convert(load(t), Options{Authority: auth})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Listeners) != 2 || len(res.Clusters) != 2 || len(res.Endpoints) != 1 || len(res.Secrets) != 1 {
				t.Fatalf("%d listeners, %d clusters, %d endpoints, %d secrets", len(res.Listeners), len(res.Clusters), len(res.Endpoints), len(res.Secrets))
			}
			backend := res.Clusters[0]
			if backend.GetName() != n("envoy.config.cluster.v3.Cluster", "backend") || backend.GetType() != clusterv3.Cluster_EDS || backend.GetLoadAssignment() != nil ||
				backend.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
				t.Errorf("the STATIC cluster: %v", backend)
			}
			if cla := res.Endpoints[0]; cla.GetClusterName() != n("envoy.config.endpoint.v3.ClusterLoadAssignment", "backend") || len(cla.GetEndpoints()) != 1 {
				t.Errorf("its endpoints: %v", cla)
			}
			if api := res.Clusters[1]; api.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil {
				t.Errorf("the EDS cluster still fetches elsewhere: %v", api)
			}
			files, err := res.Files()
			if err != nil {
				t.Fatal(err)
			}
			k := clientcheck.New(clientcheck.Envoy)
			var all strings.Builder
			for _, f := range files {
				all.Write(f.Data)
				docs, err := resource.Decode(f.Name, f.Data)
				if err != nil {
					t.Fatalf("%s does not decode: %v\n%s", f.Name, err, f.Data)
				}
				for _, d := range docs {
					k.Add(d)
				}
			}
			for _, want := range []string{
				"name: " + n("envoy.config.cluster.v3.Cluster", "backend"),
				"cluster: " + n("envoy.config.cluster.v3.Cluster", "api"),
				"name: " + n("envoy.extensions.transport_sockets.tls.v3.Secret", "www-cert") + "\n              sds_config:\n                ads: {}",
				"route_config_name: " + n("envoy.config.route.v3.RouteConfiguration", "http-routes"),
				"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
				"timeout: \"5s\"",
			} {
				if !strings.Contains(all.String(), want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if strings.Contains(all.String(), "xds_cluster") {
				t.Error("the management server's cluster was imported")
			}
			var got []string
			for _, f := range k.Findings() {
				got = append(got, f.Rule+" "+f.Msg)
			}
			if len(got) != 2 || !strings.Contains(got[0]+got[1], "→ endpoints "+n("envoy.config.endpoint.v3.ClusterLoadAssignment", "api")+": no such endpoints") ||
				!strings.Contains(got[0]+got[1], "→ route "+n("envoy.config.route.v3.RouteConfiguration", "http-routes")+": no such route") {
				t.Errorf("findings:\n%s", strings.Join(got, "\n"))
			}
			if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "xds_cluster is how the bootstrap reaches its management server") || !strings.Contains(notes, "apply a ClusterLoadAssignment named "+n("envoy.config.endpoint.v3.ClusterLoadAssignment", "api")) {
				t.Errorf("notes:\n%s", notes)
			}
		})
	}
}

// A bootstrap that does not decode is reported at its line.
func TestBadBootstrap(t *testing.T) {
	var b bootstrapv3.Bootstrap
	err := resource.DecodeMessage("e.yaml", []byte("static_resources:\n  clusters:\n  - name: x\n    type: SOMETIMES\n"), &b)
	if err == nil || !strings.Contains(err.Error(), "e.yaml:4:11: document 1: static_resources.clusters[0].type: invalid value for enum") {
		t.Errorf("error: %v", err)
	}
}

// For proxyless gRPC (Options.GRPC), a STATIC cluster's endpoints come out
// as gRPC takes them (every entry with a locality and a weight, entries
// without a locality at one priority merged rather than duplicated), and
// a STRICT_DNS cluster of one host becomes LOGICAL_DNS; what cannot be
// converted (STRICT_DNS over two hosts) is left for the checks to name.
// Without the option, STRICT_DNS stays as Envoy had it.
func TestConvertForGRPC(t *testing.T) {
	data, err := os.ReadFile("testdata/grpc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, forGRPC := range []bool{false, true} {
		var b bootstrapv3.Bootstrap
		if err := resource.DecodeMessage("testdata/grpc.yaml", data, &b); err != nil {
			t.Fatal(err)
		}
		res, err := Convert(&b, Options{GRPC: forGRPC})
		if err != nil {
			t.Fatal(err)
		}
		cla := res.Endpoints[0]
		if len(cla.GetEndpoints()) != 1 || cla.GetEndpoints()[0].GetLocality() == nil || cla.GetEndpoints()[0].GetLoadBalancingWeight().GetValue() != 1 || len(cla.GetEndpoints()[0].GetLbEndpoints()) != 2 {
			t.Errorf("greeter's endpoints: %v", cla)
		}
		types := map[string]clusterv3.Cluster_DiscoveryType{}
		for _, c := range res.Clusters {
			types[c.GetName()] = c.GetType()
		}
		wantBilling := clusterv3.Cluster_STRICT_DNS
		if forGRPC {
			wantBilling = clusterv3.Cluster_LOGICAL_DNS
		}
		if types["billing"] != wantBilling || types["ledger"] != clusterv3.Cluster_STRICT_DNS {
			t.Errorf("GRPC=%v: cluster types %v", forGRPC, types)
		}
		files, err := res.Files()
		if err != nil {
			t.Fatal(err)
		}
		k := clientcheck.New(clientcheck.GRPC)
		for _, f := range files {
			docs, err := resource.Decode(f.Name, f.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range docs {
				k.Add(d)
			}
		}
		var refused []string
		for _, f := range k.Findings() {
			refused = append(refused, f.Resource+": "+f.Rule)
		}
		want := []string{"cluster ledger: grpc/cluster-type"}
		if !forGRPC {
			want = []string{"cluster billing: grpc/cluster-type", "cluster ledger: grpc/cluster-type"}
		}
		if strings.Join(refused, "\n") != strings.Join(want, "\n") {
			t.Errorf("GRPC=%v: gRPC would refuse\n%s\nwant\n%s", forGRPC, strings.Join(refused, "\n"), strings.Join(want, "\n"))
		}
	}
}

// Localities Envoy weights are kept as they are, and the ones gRPC (and
// Envoy) would send nothing are named.
func TestConvertKeepsLocalityWeights(t *testing.T) {
	var b bootstrapv3.Bootstrap
	src := `static_resources:
  clusters:
  - name: w
    type: STATIC
    load_assignment:
      cluster_name: w
      endpoints:
      - locality: {zone: a}
        load_balancing_weight: 3
        lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}}]
      - locality: {zone: b}
        lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 2}}}}]
`
	if err := resource.DecodeMessage("w.yaml", []byte(src), &b); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(&b, Options{GRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	eps := res.Endpoints[0].GetEndpoints()
	if len(eps) != 2 || eps[0].GetLoadBalancingWeight().GetValue() != 3 || eps[1].GetLoadBalancingWeight() != nil {
		t.Errorf("weights changed: %v", eps)
	}
	if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, "cluster w: 1 of its 2 localities have no load_balancing_weight") {
		t.Errorf("notes:\n%s", notes)
	}
}
