package fleet

import (
	"reflect"
	"testing"

	"github.com/xdsd/xdsd/constraint"
)

func TestAgentOf(t *testing.T) {
	for _, c := range []struct{ name, header, want string }{
		{"envoy", "", Envoy},
		{"gRPC Go", "grpc-go/1.70.0", GRPCGo},
		{"", "grpc-go/1.70.0", GRPCGo},
		{"gRPC Java", "", GRPCJava},
		{"", "grpc-java-netty/1.68.0", GRPCJava},
		{"", "grpc-node-js/1.12.0", GRPCJS},
		{"gRPC C-core", "", GRPCCpp},
		{"", "grpc-c++/1.60.0 grpc-c/37.0.0 (linux; chttp2)", GRPCCpp},
		{"", "grpc-c/37.0.0 (linux; chttp2)", GRPCCpp},
		{"xdsd", "grpc-go/1.70.0", Xdsd},
		{"gRPC Node Pure JS", "", GRPCJS},
		{"gRPC C-core linux", "", GRPCCpp},
		{"Envoy", "", Envoy},
		// Names are matched whole or by their first words, not as
		// substrings: these name nothing known, so the header decides.
		{"django-client", "", Other},
		{"django-client", "grpc-java-netty/1.68.0", GRPCJava},
		{"mongoose", "", Other},
		{"my-go-app", "grpc-c/37.0.0", GRPCCpp},
		{"javascript-thing", "", Other},
		{"gRPC Gopher", "", Other},
		{"", "curl/8.0", Other},
		{"", "", Other},
	} {
		if got := AgentOf(c.name, c.header); got != c.want {
			t.Errorf("AgentOf(%q, %q) = %q, want %q", c.name, c.header, got, c.want)
		}
	}
	if !IsGRPC(GRPCCpp) || IsGRPC(Envoy) || IsGRPC(Xdsd) {
		t.Error("IsGRPC")
	}
}

func TestIndexGroups(t *testing.T) {
	ix := NewIndex()
	prod := constraint.Params{"env": "prod"}
	test := constraint.Params{"env": "test"}
	a := ix.Join(nil, GRPCGo, "a", prod)
	b := ix.Join(nil, GRPCGo, "b", prod)
	r := ix.Join(nil, Xdsd, "relay", nil)
	want := []Group{
		{Agent: GRPCGo, Params: prod, Count: 2, Nodes: []string{"a", "b"}},
		{Agent: Xdsd, Count: 1, Nodes: []string{"relay"}},
	}
	if got := ix.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("joined: %+v, want %+v", got, want)
	}
	// The relay subscribes for two parameter sets: counted under each,
	// no longer under its node's.
	ix.Subscribed(r, prod.Key(), prod, 1)
	ix.Subscribed(r, test.Key(), test, 2)
	ix.Subscribed(a, prod.Key(), prod, 3)
	want = []Group{
		{Agent: GRPCGo, Params: prod, Count: 2, Nodes: []string{"a", "b"}},
		{Agent: Xdsd, Params: prod, Count: 1, Nodes: []string{"relay"}},
		{Agent: Xdsd, Params: test, Count: 1, Nodes: []string{"relay"}},
	}
	if got := ix.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("subscribed: %+v, want %+v", got, want)
	}
	ix.Subscribed(r, test.Key(), test, -2)
	ix.Subscribed(r, prod.Key(), prod, -1)
	ix.Leave(b)
	ix.Leave(b)
	want = []Group{
		{Agent: GRPCGo, Params: prod, Count: 1, Nodes: []string{"a"}},
		{Agent: Xdsd, Count: 1, Nodes: []string{"relay"}},
	}
	if got := ix.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after unsubscribing and leaving: %+v, want %+v", got, want)
	}
	ix.Leave(a)
	ix.Leave(r)
	ix.Subscribed(a, prod.Key(), prod, 1) // after leaving: ignored
	if got := ix.Groups(); len(got) != 0 {
		t.Fatalf("all left: %+v", got)
	}
}

func TestMerge(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	got := Merge(
		[]Group{{Agent: Envoy, Params: prod, Count: 2, Nodes: []string{"e1", "e3"}}},
		[]Group{{Agent: Envoy, Params: prod, Count: 3, Nodes: []string{"e0", "e2", "e4"}}, {Agent: GRPCGo, Count: 1, Nodes: []string{"g"}}},
	)
	want := []Group{
		{Agent: Envoy, Params: prod, Count: 5, Nodes: []string{"e0", "e1", "e2"}},
		{Agent: GRPCGo, Count: 1, Nodes: []string{"g"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Merge = %+v, want %+v", got, want)
	}
}
