package resource

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
)

// maxFuzzInput bounds the inputs FuzzDecode decodes. Go's fuzzer minimizes
// every input that finds new coverage before it fuzzes on, with a
// subset-removal pass quadratic in the input's length, and reports no
// progress meanwhile (internal/fuzz.minimizeBytes, bounded only by
// -fuzzminimizetime, 60s by default). Decode costs 0.1–0.3 ms per input of
// a few hundred bytes under coverage instrumentation, and about 1 ms per
// realistic file, so the example files as seeds stalled whole runs at
// "execs: N (0/sec)" while both workers minimized 2 KB inputs. At 256 bytes
// a minimization takes at most a few seconds (512 would be ~45s). Larger
// inputs, e.g. from an older fuzz cache, are skipped without decoding, so
// they never count as interesting; whole files are tested by
// TestLoadExamples.
const maxFuzzInput = 256

// FuzzDecode: the authoring decoder never panics, fails only with
// DocErrors, and what it accepts decodes again, from the JSON it kept, to
// the same variant; and it decodes every input as it does with protojson
// alone (the fast path changes nothing but the speed).
//
// The seeds are small on purpose (see maxFuzzInput); between them they
// reach every form Decode accepts: JSON object and array, YAML streams,
// wrappers, constraints in both forms, nested Anys, collections and
// redirects, and the YAML and JSON input it rejects (tags, null
// constraints, repeated keys, broken syntax).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}`,
		`[{"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}, {"name": "x", "resource": {}}]`,
		"name: r\nconstraints: env=prod || !exists(v)\nresource:\n  \"@type\": envoy.config.route.v3.RouteConfiguration\n",
		"--- {a: 1}\n...\n---\n- 1\n- 2\n",
		"name: xdstp://a/envoy.config.listener.v3.ListenerCollection/c\nresource:\n  \"@type\": envoy.config.listener.v3.ListenerCollection\n  entries: [{locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: x}}]\n",
		"\"@type\": envoy.config.cluster.v3.Cluster\nname: c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\nlb_policy: ROUND_ROBIN\n---\n\"@type\": envoy.config.cluster.v3.Cluster\nname: d\n",
		"\"@type\": envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: v\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: \"\"}\n    route: {cluster: c}\n",
		"\"@type\": envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c\nendpoints:\n- lb_endpoints:\n  - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 1}}}\n",
		"\"@type\": envoy.config.listener.v3.Listener\nname: l\napi_listener: {api_listener: {\"@type\": envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager, stat_prefix: s, rds: {route_config_name: r, config_source: {ads: {}}}}}\n",
		"name: r\nconstraints: {and_constraints: {constraints: [{constraint: {key: env, value: prod}}, {constraint: {key: v, exists: {}}}]}}\nresource: {\"@type\": envoy.config.route.v3.RouteConfiguration}\n",
		"constraints: env=a\nresource: {\"@type\": envoy.config.cluster.v3.Cluster, name: c}\n---\nconstraints: env!=a\nresource: {\"@type\": envoy.config.cluster.v3.Cluster, name: c}\n",
		"type: cds\nname: xdstp://a/envoy.config.cluster.v3.Cluster/o?k=v\nresource: {\"@type\": xds.core.v3.ResourceLocator, authority: b, resource_type: envoy.config.cluster.v3.Cluster, id: new}\n",
		"\"@type\": envoy.config.route.v3.VirtualHost\nname: r/v\ndomains: [\"*\"]\n",
		"- name: c\n  constraints: !exists(v)\n  resource: {\"@type\": envoy.config.cluster.v3.Cluster}\n- !x {a: b}\n",
		"{\"name\": \"c\", \"constraints\": null, \"name\": 1, \"resource\": {\"@type\": \"envoy.config.cluster.v3.Cluster\"}}",
		"name: c\nname: d\nconstraints: !a && b\n[",
	} {
		if len(s) > maxFuzzInput {
			f.Fatalf("seed longer than maxFuzzInput: %q", s)
		}
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzInput {
			return
		}
		docs, err := Decode("fuzz", data)
		sameWithoutFastPath(t, "fuzz", data, docs, err)
		if err != nil {
			var l ErrorList
			if !errors.As(err, &l) || len(l) == 0 {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			return
		}
		for _, d := range docs {
			again, err := Decode("again", d.Raw)
			if err != nil {
				t.Fatalf("accepted document does not decode again: %v\n%s", err, d.Raw)
			}
			v, w := d.Variant, again[0].Variant
			if v.Key() != w.Key() || string(v.Any()) != string(w.Any()) {
				t.Fatalf("re-decoding changed the variant: %v → %v", v.Key(), w.Key())
			}
		}
	})
}

// sameWithoutFastPath fails t unless decoding data with protojson alone
// gives what docs and err are: the same errors, and the same variants
// with the same encodings.
func sameWithoutFastPath(t testing.TB, source string, data []byte, docs []*Document, err error) {
	t.Helper()
	protojsonOnly.Store(true)
	slow, serr := Decode(source, data)
	protojsonOnly.Store(false)
	if fmt.Sprint(err) != fmt.Sprint(serr) {
		t.Fatalf("errors differ:\nfast path: %v\nprotojson: %v\ninput: %q", err, serr, data)
	}
	if len(docs) != len(slow) {
		t.Fatalf("%d documents, %d with protojson: %q", len(docs), len(slow), data)
	}
	for i, d := range docs {
		v, w := d.Variant, slow[i].Variant
		if v.Key() != w.Key() || string(v.Any()) != string(w.Any()) || !proto.Equal(d.Message, slow[i].Message) {
			t.Fatalf("document %d differs from protojson's: %v (%x) vs %v (%x)", i, v.Key(), v.Any(), w.Key(), w.Any())
		}
	}
}
