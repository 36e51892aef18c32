package resource

import (
	"runtime"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// nestedStruct is {"k": {"k": ... {}}}, n objects inside the outer one.
func nestedStruct(n int) *structpb.Struct {
	s := &structpb.Struct{}
	for range n {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStructValue(s)}}
	}
	return s
}

// deepClusterYAML is a Cluster whose metadata x is nestedStruct(n+1),
// written as the flow mapping k: {k: ... {}}.
func deepClusterYAML(n int) string {
	return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: a\nmetadata:\n  filter_metadata:\n    x:\n      k: " +
		strings.Repeat("{k: ", n) + "{}" + strings.Repeat("}", n) + "\n"
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Validating a deep message allocates in proportion to its size: field
// paths are spelled out only for an error, not at every level (which cost
// memory growing with the square of the depth: 3.9 GB for a 45 KB
// document nested 9000 deep).
func TestValidateDeepAllocatesLinearly(t *testing.T) {
	const depth = 3000
	m := &clusterv3.Cluster{Name: "a", Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"x": nestedStruct(depth)}}}
	var errs []FieldError
	n := allocated(func() { errs = Validate(m) })
	if len(errs) != 0 {
		t.Fatalf("Validate: %v", errs)
	}
	// Three messages a level (Struct, map entry, Value); it takes about
	// 300 bytes each (2.6 MB), paths built at every level took hundreds of
	// MB.
	if limit := uint64(depth * 3 * 1024); n > limit {
		t.Errorf("Validate of a Struct nested %d deep allocated %d bytes, want at most %d", depth, n, limit)
	}
}

// Decoding the auditor's 45 KB document nested 9000 deep is rejected
// (it nests deeper than clients decode) without quadratic memory: every
// stage (YAML, protojson, validation, error paths) is linear.
func TestDecodeDeepDocumentAllocatesLinearly(t *testing.T) {
	doc := []byte(deepClusterYAML(9000))
	var err error
	n := allocated(func() { _, err = Decode("deep.yaml", doc) })
	if err == nil || !strings.Contains(err.Error(), "deep.yaml:6:7: document 1: metadata.filter_metadata[\"x\"].fields[\"k\"]") ||
		!strings.Contains(err.Error(), "messages nested more than 100 deep") {
		t.Fatalf("Decode: %v", err)
	}
	// About 19 MB (425 bytes an input byte); it was 3.9 GB.
	if limit := uint64(2000 * len(doc)); n > limit {
		t.Errorf("Decode of a %d-byte document nested 9000 deep allocated %d bytes, want at most %d", len(doc), n, limit)
	}
}

// An authored resource is accepted exactly when a decoder with the
// recursion limit Envoy and gRPC use (100 nested messages) can decode its
// encoding: the same shape nested 5200 deep was accepted and then NACKed by
// every client ("proto: exceeded maximum recursion depth").
func TestNestingLimitMatchesDecoder(t *testing.T) {
	accepted, rejected := 0, 0
	for n := 20; n <= 40; n++ {
		docs, err := Decode("n.yaml", []byte(deepClusterYAML(n)))
		var m clusterv3.Cluster
		var derr error
		if err == nil {
			derr = proto.UnmarshalOptions{RecursionLimit: MaxNesting}.Unmarshal(docs[0].Variant.Body(), &m)
		} else {
			// What would have been served.
			c := &clusterv3.Cluster{Name: "a", Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"x": nestedStruct(n + 1)}}}
			b, _ := proto.Marshal(c)
			derr = proto.UnmarshalOptions{RecursionLimit: MaxNesting}.Unmarshal(b, &m)
			if !strings.Contains(err.Error(), "n.yaml:6:7: document 1: metadata.filter_metadata") || !strings.Contains(err.Error(), "nested more than 100 deep") {
				t.Errorf("depth %d: error %v, want one naming the field and the limit", n, err)
			}
		}
		if (err == nil) != (derr == nil) {
			t.Errorf("depth %d: Decode error %v, but decoding with the recursion limit: %v", n, err, derr)
		}
		if err == nil {
			accepted++
		} else {
			rejected++
		}
	}
	if accepted == 0 || rejected == 0 {
		t.Errorf("accepted %d, rejected %d: the range misses the limit", accepted, rejected)
	}
}

// A client decodes the contents of an Any on their own, so the levels
// inside count from 1 again; they are checked too.
func TestNestingLimitInsideAny(t *testing.T) {
	inner := func(n int) string {
		return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: a\nmetadata:\n  typed_filter_metadata:\n    x:\n      \"@type\": type.googleapis.com/google.protobuf.Struct\n      value:\n        k: " +
			strings.Repeat("{k: ", n) + "{}" + strings.Repeat("}", n) + "\n"
	}
	// 33 Structs nested in the Any's Struct: 100 levels from it, 104 from
	// the Cluster.
	docs, err := Decode("a.yaml", []byte(inner(32)))
	if err != nil {
		t.Fatalf("32 deep in an Any: %v", err)
	}
	var c clusterv3.Cluster
	if err := proto.Unmarshal(docs[0].Variant.Body(), &c); err != nil {
		t.Fatal(err)
	}
	a := c.Metadata.TypedFilterMetadata["x"]
	if err := (proto.UnmarshalOptions{RecursionLimit: MaxNesting}).Unmarshal(a.Value, &structpb.Struct{}); err != nil {
		t.Errorf("the Any's contents do not decode with the limit: %v", err)
	}
	_, err = Decode("a.yaml", []byte(inner(40)))
	if err == nil || !strings.Contains(err.Error(), `a.yaml:6:7: document 1: metadata.typed_filter_metadata["x"].fields["k"]`) {
		t.Errorf("40 deep in an Any: %v, want the nesting error inside it", err)
	}
}
