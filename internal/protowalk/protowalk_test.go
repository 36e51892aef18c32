package protowalk

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestHolds(t *testing.T) {
	cases := map[string]struct {
		holds bool
		got   bool
	}{
		"Any":              {true, Holds((&anypb.Any{}).ProtoReflect().Descriptor())},
		"Cluster":          {true, Holds((&clusterv3.Cluster{}).ProtoReflect().Descriptor())},
		"Metadata (a map)": {true, Holds((&corev3.Metadata{}).ProtoReflect().Descriptor())},
		"Duration":         {false, Holds((&durationpb.Duration{}).ProtoReflect().Descriptor())},
		"Struct (a cycle)": {false, Holds((&structpb.Struct{}).ProtoReflect().Descriptor())},
		"SocketAddress":    {false, Holds((&corev3.SocketAddress{}).ProtoReflect().Descriptor())},
		"none (nil)":       {false, Holds(nil)},
	}
	for name, c := range cases {
		if c.got != c.holds {
			t.Errorf("%s: %v, want %v", name, c.got, c.holds)
		}
	}
}
