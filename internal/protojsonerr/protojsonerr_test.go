package protojsonerr

import (
	"encoding/json"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// protojsonColumn is where protojson itself places its error, read from
// its text: only this test reads it, to hold Explain to the same place,
// and it fails loudly (not silently) if protojson changes how it writes it.
var protojsonColumn = regexp.MustCompile(`\(line 1:(\d+)\)`)

func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		msg    proto.Message
		js     string
		at     string // the text at the error's offset starts with this
		want   string
		unkURL string
		// ownPlace: Explain places it better than protojson, which
		// names the end of the object.
		ownPlace bool
	}{
		{"unknown field", &clusterv3.Cluster{}, `{"name": "c", "bogus": 1}`, `"bogus"`, `unknown field "bogus"`, "", false},
		{"enum", &clusterv3.Cluster{}, `{"lb_policy": "FASTEST"}`, `"FASTEST"`, `invalid value for enum field lbPolicy: "FASTEST"`, "", false},
		{"string as number", &clusterv3.Cluster{}, `{"name": 5}`, `5`, `invalid value for string field name: 5`, "", false},
		{"duration", &clusterv3.Cluster{}, `{"connect_timeout": "5 seconds"}`, `"5 seconds"`, `invalid google.protobuf.Duration value "5 seconds"`, "", false},
		{"wrapper", &clusterv3.Cluster{}, `{"per_connection_buffer_limit_bytes": "x"}`, `"x"`, `invalid google.protobuf.UInt32Value value "x"`, "", false},
		{"message not object", &clusterv3.Cluster{}, `{"load_assignment": 5}`, `5`, `invalid value for message field loadAssignment: 5 (want a JSON object)`, "", false},
		{"list not array", &clusterv3.Cluster{}, `{"health_checks": {}}`, `{}`, `invalid value for repeated field healthChecks: {} (want a JSON array)`, "", false},
		{"nested", &routev3.RouteConfiguration{}, `{"virtual_hosts": [{"name": "v", "routes": [{"match": {"prefix": ""}, "bogus": 1}]}]}`, `"bogus"`, `unknown field "bogus"`, "", false},
		{"list element", &routev3.RouteConfiguration{}, `{"virtual_hosts": [{"name": "v", "domains": ["a", 7]}]}`, `7`, `invalid value for string field domains: 7`, "", false},
		{"list of messages element", &routev3.RouteConfiguration{}, `{"virtual_hosts": [{}, 3]}`, `3`, `invalid value for message field virtualHosts: 3 (want a JSON object)`, "", false},
		{"duplicate by two names", &clusterv3.Cluster{}, `{"lb_policy": "RANDOM", "lbPolicy": "RANDOM"}`, `"lbPolicy"`, `duplicate field "lbPolicy"`, "", false},
		{"oneof twice", &clusterv3.Cluster{}, `{"type": "STATIC", "cluster_type": {"name": "x"}}`, `"cluster_type"`, `error parsing "cluster_type", oneof envoy.config.cluster.v3.Cluster.cluster_discovery_type is already set`, "", false},
		{"oneof null does not set", &clusterv3.Cluster{}, `{"type": null, "cluster_type": {"name": "x"}, "bogus": 1}`, `"bogus"`, `unknown field`, "", false},
		{"map value", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": 5}}`, `5`, `invalid value for message field typedPerFilterConfig: 5`, "", false},
		{"any unknown type", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": {"@type": "type.googleapis.com/no.Such"}}}`, `"type.googleapis.com/no.Such"`, `unknown type "type.googleapis.com/no.Such"`, "type.googleapis.com/no.Such", false},
		{"any missing type", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": {"x": 1}}}`, `{"x"`, `missing "@type" field`, "", false},
		{"inside any", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", "dynamic_stats": "yes"}}}`, `"yes"`, `invalid google.protobuf.BoolValue value "yes"`, "", false},
		{"any of a well-known type", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "x"}}}`, `"x"`, `invalid google.protobuf.Duration value "x"`, "", false},
		{"any of a well-known type without value", &routev3.RouteConfiguration{}, `{"typed_per_filter_config": {"a": {"@type": "type.googleapis.com/google.protobuf.Duration"}}}`, `{"@type"`, `missing "value" field`, "", true},
		{"int map key", &discoveryv3.DynamicParameterConstraints{}, `{"constraint": {"key": "k", "value": 3}}`, `3`, `invalid value for string field value: 3`, "", false},
		{"struct must be an object", &structpb.Struct{}, `[1]`, `[1]`, `invalid google.protobuf.Struct value [1]`, "", false},
		{"not an object", &clusterv3.Cluster{}, `[1]`, `[1]`, `invalid value for message envoy.config.cluster.v3.Cluster: [1] (want a JSON object)`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			perr := protojson.Unmarshal([]byte(tc.js), tc.msg)
			if perr == nil {
				t.Fatalf("protojson took %s", tc.js)
			}
			e := Explain([]byte(tc.js), tc.msg.ProtoReflect().Descriptor(), Options{})
			if e == nil {
				t.Fatalf("Explain found nothing; protojson: %v", perr)
			}
			if !strings.HasPrefix(tc.js[e.Offset:], tc.at) {
				t.Errorf("at %d: %q, want %q", e.Offset, tc.js[e.Offset:], tc.at)
			}
			if !strings.Contains(e.Msg, tc.want) {
				t.Errorf("Msg = %q, want %q", e.Msg, tc.want)
			}
			if e.UnknownType != tc.unkURL {
				t.Errorf("UnknownType = %q, want %q", e.UnknownType, tc.unkURL)
			}
			if m := protojsonColumn.FindStringSubmatch(perr.Error()); m != nil && !tc.ownPlace {
				if col, _ := strconv.Atoi(m[1]); col-1 != e.Offset {
					t.Errorf("at offset %d; protojson places it at %d: %v", e.Offset, col-1, perr)
				}
			}
		})
	}
}

func TestDiscardUnknown(t *testing.T) {
	js := []byte(`{"bogus": 1, "name": 5}`)
	e := Explain(js, (&clusterv3.Cluster{}).ProtoReflect().Descriptor(), Options{DiscardUnknown: true})
	if e == nil || string(js[e.Offset:e.Offset+1]) != "5" {
		t.Fatalf("Explain = %+v, want the name's value", e)
	}
}

// TestAgreesWithProtojson breaks a valid cluster at random (a value
// replaced by one of another kind, a key misspelt) and holds Explain to
// finding an error wherever protojson does, at the place protojson names.
func TestAgreesWithProtojson(t *testing.T) {
	base := `{"name": "c", "type": "STRICT_DNS", "connect_timeout": "1s", "lb_policy": "ROUND_ROBIN",` +
		` "load_assignment": {"cluster_name": "c", "endpoints": [{"lb_endpoints": [{"endpoint": {"address":` +
		` {"socket_address": {"address": "h", "port_value": 80}}}}]}]},` +
		` "circuit_breakers": {"thresholds": [{"max_connections": 3, "priority": "HIGH"}]},` +
		` "metadata": {"filter_metadata": {"x": {"a": [1, "b", null]}}},` +
		` "typed_extension_protocol_options": {"r": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router", "suppress_envoy_headers": true}}}`
	if err := protojson.Unmarshal([]byte(base), &clusterv3.Cluster{}); err != nil {
		t.Fatal(err)
	}
	// The offsets of the scalar values and keys of base.
	var spots []int
	for i := 0; i < len(base); i++ {
		if base[i] == '"' || base[i] == 't' || (base[i] >= '0' && base[i] <= '9') || base[i] == 'n' && strings.HasPrefix(base[i:], "null") {
			if i > 0 && (base[i-1] == ' ' || base[i-1] == '[' || base[i-1] == '{') {
				spots = append(spots, i)
			}
		}
	}
	repl := []string{`5`, `"x"`, `true`, `null`, `{}`, `[]`, `"bogus": 1, "zz"`, `-1`, `1.5`, `"1.5s"`}
	r := rand.New(rand.NewSource(1))
	md := (&clusterv3.Cluster{}).ProtoReflect().Descriptor()
	w := &walker{js: []byte(base)}
	checked := 0
	for n := 0; n < 400; n++ {
		at := spots[r.Intn(len(spots))]
		end := w.skip(at)
		js := base[:at] + repl[r.Intn(len(repl))] + base[end:]
		if !json.Valid([]byte(js)) {
			continue // a key replaced: Explain reads valid JSON only
		}
		perr := protojson.Unmarshal([]byte(js), &clusterv3.Cluster{})
		if perr == nil {
			continue
		}
		checked++
		e := Explain([]byte(js), md, Options{})
		if e == nil {
			t.Errorf("Explain found nothing in %s; protojson: %v", js, perr)
			continue
		}
		if m := protojsonColumn.FindStringSubmatch(perr.Error()); m != nil {
			if col, _ := strconv.Atoi(m[1]); col-1 != e.Offset {
				t.Errorf("%s\nExplain: %q at %d; protojson at %d: %v", js, e.Msg, e.Offset, col-1, perr)
			}
		}
	}
	if checked < 60 {
		t.Fatalf("only %d broken inputs", checked)
	}
}
