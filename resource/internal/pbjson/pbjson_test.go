package pbjson_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
	"github.com/xdsd/xdsd/resource" // registers every Envoy extension type
	"github.com/xdsd/xdsd/resource/internal/pbjson"
)

// check holds Transcode to its contract for one input: when it takes js,
// protojson takes it too, and the bytes are those of a deterministic
// Marshal of protojson's message. It reports whether js was taken.
func check(t testing.TB, js []byte, md protoreflect.MessageDescriptor, skipType bool) bool {
	t.Helper()
	got, _, ok := pbjson.Transcode(js, md, skipType)
	if !ok {
		return false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		t.Fatal(err)
	}
	m := mt.New().Interface()
	in := js
	if skipType {
		// protojson reads "@type" only in an Any; blank the member out.
		in = blankType(js)
	}
	if err := protojson.Unmarshal(in, m); err != nil {
		t.Fatalf("taken, but protojson says %v:\n%s", err, js)
	}
	want, err := resource.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		var m2 = mt.New().Interface()
		err := proto.Unmarshal(got, m2)
		t.Fatalf("bytes differ for %s\n%s\ngot  %x (%v: %v)\nwant %x", md.FullName(), js, got, err, m2, want)
	}
	return true
}

// blankType replaces a top-level "@type" member by spaces, which is what
// the caller of Transcode with skipType does for protojson.
func blankType(js []byte) []byte {
	var top map[string]json.RawMessage
	if err := jsonUnmarshal(js, &top); err != nil {
		return js
	}
	delete(top, "@type")
	b, _ := jsonMarshal(top)
	return b
}

// Every Istio-like cluster and every mesh resource of internal/meshgen is
// taken, and encodes as protojson and Marshal would.
func TestMeshgenIsTaken(t *testing.T) {
	for _, gen := range []func(*bytes.Buffer, int) error{
		func(b *bytes.Buffer, n int) error { return meshgen.Clusters(b, n) },
		func(b *bytes.Buffer, n int) error { return meshgen.Mesh(b, n) },
	} {
		var buf bytes.Buffer
		if err := gen(&buf, 300); err != nil {
			t.Fatal(err)
		}
		var docs []map[string]jsonRaw
		if err := jsonUnmarshal(buf.Bytes(), &docs); err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			res := d["resource"]
			if res == nil {
				b, _ := jsonMarshal(d)
				res = b
			}
			var typ struct {
				Type string `json:"@type"`
			}
			if err := jsonUnmarshal(res, &typ); err != nil {
				t.Fatal(err)
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByURL(typ.Type)
			if err != nil {
				t.Fatal(err)
			}
			if !check(t, res, mt.Descriptor(), true) {
				t.Fatalf("document %d (%s) not taken:\n%s", i, typ.Type, res)
			}
		}
	}
}

// Random messages of every type of the Envoy API: written by protojson in
// its several styles, read back by Transcode.
func TestMatchesProtojson(t *testing.T) {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		n := string(mt.Descriptor().FullName())
		if strings.HasPrefix(n, "envoy.") || strings.HasPrefix(n, "xds.") || strings.HasPrefix(n, "udpa.") {
			types = append(types, mt)
		}
		return true
	})
	if len(types) < 1000 {
		t.Fatalf("only %d types registered", len(types))
	}
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	taken, total := 0, 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		for _, mt := range types {
			m := mt.New()
			fill(m, r, 0, types)
			opts := protojson.MarshalOptions{UseProtoNames: r.IntN(2) == 0, UseEnumNumbers: r.IntN(4) == 0, EmitUnpopulated: r.IntN(8) == 0}
			if r.IntN(2) == 0 {
				opts.Indent = "  "
			}
			js, err := opts.Marshal(m.Interface())
			if err != nil {
				continue // a value protojson cannot write (an unknown Any type, say)
			}
			total++
			if check(t, js, mt.Descriptor(), false) {
				taken++
			}
		}
	}
	t.Logf("%d of %d random messages taken", taken, total)
	if taken < total/3 {
		t.Errorf("only %d of %d random messages taken: the fast path is hardly used", taken, total)
	}
}

// Inputs protojson refuses, or reads in ways the fast path leaves to it,
// are not taken; the rest are taken as protojson reads them.
func TestEdges(t *testing.T) {
	md := (&clusterv3.Cluster{}).ProtoReflect().Descriptor()
	for _, c := range []struct {
		js    string
		taken bool
	}{
		{`{}`, true},
		{` {"name": "a"} `, true},
		{`{"name": "a", "name": "b"}`, false},
		{`{"name": "a", "altStatName": "x", "alt_stat_name": "y"}`, false},
		{`{"name": "a",}`, false},
		{`{"name": "a"} x`, false},
		{`{"name": null}`, false},
		{`{"nope": 1}`, false},
		{`{"name": "\u00e9\n\"x\"\/"}`, true},
		{`{"name": "\ud83d\ude00"}`, false},
		{`{"name": "\x"}`, false},
		{"{\"name\": \"a\x01\"}", false},
		{"{\"name\": \"\xff\"}", false},
		{`{"n\u0061me": "a"}`, false},
		{`{"connect_timeout": "1.5s"}`, true},
		{`{"connect_timeout": "-0.000000001s"}`, true},
		{`{"connect_timeout": "01s"}`, false},
		{`{"connect_timeout": "1.1234567891s"}`, false},
		{`{"connect_timeout": "315576000001s"}`, false},
		{`{"connect_timeout": "0s"}`, true},
		{`{"type": "EDS"}`, true},
		{`{"type": "STATIC"}`, true},
		{`{"type": 3}`, false},
		{`{"type": "NOPE"}`, false},
		{`{"type": "EDS", "cluster_type": {"name": "x"}}`, false},
		{`{"per_connection_buffer_limit_bytes": 0}`, true},
		{`{"per_connection_buffer_limit_bytes": "7"}`, true},
		{`{"per_connection_buffer_limit_bytes": 4294967296}`, false},
		{`{"per_connection_buffer_limit_bytes": -1}`, false},
		{`{"per_connection_buffer_limit_bytes": 1.0}`, false},
		{`{"per_connection_buffer_limit_bytes": 1e2}`, false},
		{`{"per_connection_buffer_limit_bytes": 01}`, false},
		{`{"per_connection_buffer_limit_bytes": 1x}`, false},
		{`{"close_connections_on_host_health_failure": true}`, true},
		{`{"close_connections_on_host_health_failure": "true"}`, false},
		{`{"close_connections_on_host_health_failure": truex}`, false},
		{`{"dns_refresh_rate": "5s", "respect_dns_ttl": false}`, true},
		{`{"metadata": {"filter_metadata": {"b": {"x": [1, -2.5e3, "s", true, null, {}, []]}, "a": {}}}}`, true},
		{`{"metadata": {"filter_metadata": {"a": {}, "a": {}}}}`, false},
		{`{"metadata": {"filter_metadata": {"a": {"k": 1, "k": 2}}}}`, false},
		{`{"metadata": {"filter_metadata": {"a": {"k": 1e999}}}}`, false},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": "type.googleapis.com/envoy.config.core.v3.Locality", "region": "r"}}}}`, true},
		{`{"metadata": {"typed_filter_metadata": {"a": {"region": "r", "@type": "type.googleapis.com/envoy.config.core.v3.Locality"}}}}`, true},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": "type.googleapis.com/nope.Nope"}}}}`, false},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": "type.googleapis.com/envoy.config.core.v3.Locality", "@type": "x"}}}}`, false},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "1s"}}}}`, false},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": 1}}}}`, false},
		{`{"metadata": {"typed_filter_metadata": {"a": {"@type": "type.googleapis.com/envoy.config.core.v3.Locality"}}}}`, true},
		{`{"circuit_breakers": {"thresholds": [{"max_connections": 0}, {"max_connections": 5, "priority": "HIGH"}]}}`, true},
		{`{"circuit_breakers": {"thresholds": [null]}}`, false},
		{`{"circuit_breakers": {"thresholds": []}}`, true},
		{`{"common_lb_config": {"healthy_panic_threshold": {"value": 0}}}`, true},
		{`{"common_lb_config": {"healthy_panic_threshold": {"value": -0.0}}}`, true},
		{`{"common_lb_config": {"healthy_panic_threshold": {"value": 1e400}}}`, false},
		{`{"least_request_lb_config": {"choice_count": 3}, "round_robin_lb_config": {}}`, false},
		{`{"lb_subset_config": {"subset_selectors": [{"keys": ["a", "b"]}]}}`, true},
		{`{"dns_lookup_family": "V4_ONLY", "typed_extension_protocol_options": {"z": {"@type": "type.googleapis.com/envoy.config.core.v3.Http2ProtocolOptions"}, "a": {"@type": "type.googleapis.com/envoy.config.core.v3.Http1ProtocolOptions", "accept_http_10": true}}}`, true},
	} {
		if got := check(t, []byte(c.js), md, false); got != c.taken {
			t.Errorf("%s: taken %v, want %v", c.js, got, c.taken)
		}
	}
	// The top object's "@type", as a resource is written.
	if !check(t, []byte(`{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "a"}`), md, true) {
		t.Error("a resource with its @type not taken")
	}
	// A type with a JSON form of its own is not taken at the top.
	if _, _, ok := pbjson.Transcode([]byte(`"1s"`), (&durationpb.Duration{}).ProtoReflect().Descriptor(), false); ok {
		t.Error("a Duration taken at the top")
	}
}

// FuzzTranscode: whatever the input, an input taken is one protojson
// reads to the same bytes.
func FuzzTranscode(f *testing.F) {
	var buf bytes.Buffer
	if err := meshgen.Clusters(&buf, 3); err != nil {
		f.Fatal(err)
	}
	var docs []map[string]jsonRaw
	if err := jsonUnmarshal(buf.Bytes(), &docs); err != nil {
		f.Fatal(err)
	}
	for _, d := range docs {
		res := d["resource"]
		if res == nil {
			res, _ = jsonMarshal(d)
		}
		f.Add([]byte(res))
	}
	f.Add([]byte(`{"name": "a", "metadata": {"filter_metadata": {"a": {"k": [1, null, {"x": "y"}]}}}}`))
	md := (&clusterv3.Cluster{}).ProtoReflect().Descriptor()
	f.Fuzz(func(t *testing.T, js []byte) {
		check(t, js, md, true)
	})
}

// BenchmarkTranscode compares the fast path with protojson followed by a
// deterministic Marshal, on Istio-like clusters.
func BenchmarkTranscode(b *testing.B) {
	var buf bytes.Buffer
	if err := meshgen.Clusters(&buf, 500); err != nil {
		b.Fatal(err)
	}
	var docs []map[string]jsonRaw
	if err := jsonUnmarshal(buf.Bytes(), &docs); err != nil {
		b.Fatal(err)
	}
	md := (&clusterv3.Cluster{}).ProtoReflect().Descriptor()
	var bodies [][]byte
	size := 0
	for _, d := range docs {
		res := d["resource"]
		if res == nil {
			res, _ = jsonMarshal(d)
		}
		bodies = append(bodies, blankType(res))
		size += len(bodies[len(bodies)-1])
	}
	b.Run("pbjson", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for _, js := range bodies {
				if _, _, ok := pbjson.Transcode(js, md, false); !ok {
					b.Fatal("not taken")
				}
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for _, js := range bodies {
				m := &clusterv3.Cluster{}
				if err := protojson.Unmarshal(js, m); err != nil {
					b.Fatal(err)
				}
				if _, err := resource.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("pbjson+unmarshal", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for _, js := range bodies {
				out, _, ok := pbjson.Transcode(js, md, false)
				if !ok {
					b.Fatal("not taken")
				}
				if err := proto.Unmarshal(out, &clusterv3.Cluster{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// fill sets random fields of m, as deep as a few levels.
func fill(m protoreflect.Message, r *rand.Rand, depth int, types []protoreflect.MessageType) {
	md := m.Descriptor()
	switch md.FullName() {
	case "google.protobuf.Any":
		if depth > 3 {
			return
		}
		inner := types[r.IntN(len(types))].New()
		fill(inner, r, depth+1, types)
		a, err := anypb.New(inner.Interface())
		if err == nil {
			proto.Merge(m.Interface(), a)
		}
		return
	case "google.protobuf.Duration":
		proto.Merge(m.Interface(), durationpb.New(randDuration(r)))
		return
	case "google.protobuf.Timestamp":
		proto.Merge(m.Interface(), timestamppb.New(timestamppb.Now().AsTime().Add(randDuration(r))))
		return
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		s, _ := structpb.NewStruct(map[string]any{"a": 1.5, "b": []any{"x", nil, true, map[string]any{"c": -3.0}}, "": "e"})
		switch md.FullName() {
		case "google.protobuf.Struct":
			proto.Merge(m.Interface(), s)
		case "google.protobuf.Value":
			proto.Merge(m.Interface(), structpb.NewStructValue(s))
		default:
			proto.Merge(m.Interface(), s.Fields["b"].GetListValue())
		}
		return
	case "google.protobuf.FieldMask":
		return
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(3) == 0 || fd.IsExtension() {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Kind() == protoreflect.MessageKind {
					if depth > 4 {
						break
					}
					e := l.NewElement()
					fill(e.Message(), r, depth+1, types)
					l.Append(e)
				} else {
					l.Append(randScalar(fd, r))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				k := randScalar(fd.MapKey(), r).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					if depth > 4 {
						break
					}
					v := mp.NewValue()
					fill(v.Message(), r, depth+1, types)
					mp.Set(k, v)
				} else {
					mp.Set(k, randScalar(fd.MapValue(), r))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 4 {
				continue
			}
			fill(m.Mutable(fd).Message(), r, depth+1, types)
		default:
			m.Set(fd, randScalar(fd, r))
		}
	}
}

func randDuration(r *rand.Rand) time.Duration {
	return time.Duration(r.Int64N(2e15)-1e15) / time.Duration([]int64{1, 1000, 1e9}[r.IntN(3)])
}

var randStrings = []string{"", "a", "x-1.example.com", "é ü 🙂", "quote\" back\\ nl\n tab\t", "<>&'", "0"}

func randScalar(fd protoreflect.FieldDescriptor, r *rand.Rand) protoreflect.Value {
	ints := []int64{0, 1, -1, 7, 300, math.MaxInt32, math.MinInt32}
	big := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 40}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(r.IntN(vs.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(ints[r.IntN(len(ints))]))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(big[r.IntN(len(big))])
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32([]uint32{0, 1, 80, math.MaxUint32}[r.IntN(4)])
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64([]uint64{0, 1, 1 << 50, math.MaxUint64}[r.IntN(4)])
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32([]float32{0, 1.5, -2, float32(math.Copysign(0, -1)), 3.4e38, 1e-7}[r.IntN(6)])
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64([]float64{0, 0.1, -2.5, math.Copysign(0, -1), 1e300, math.Inf(1), math.NaN(), 123456789.125}[r.IntN(8)])
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(randStrings[r.IntN(len(randStrings))])
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprint(r.IntN(1000))))
	}
	return protoreflect.ValueOfString("")
}

type jsonRaw = json.RawMessage

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
