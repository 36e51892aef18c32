package protocol

import (
	"runtime"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

func routeVariant(t *testing.T, c constraint.Constraints, version string) *resource.Variant {
	t.Helper()
	body, err := resource.Marshal(&routev3.RouteConfiguration{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	return resource.NewVariant(resource.ForURL(resource.RouteURL), "r", c, version, "", body)
}

// A variant's fragments decode as the messages they claim to be: the
// discovery Resource (named plainly, or by resource_name with constraints),
// and the Any wrapping it.
func TestFragmentsDecode(t *testing.T) {
	c := constraint.MustParse("env=prod")
	v := routeVariant(t, c, "7")
	f := (&fragTable{}).of(v)
	var a anypb.Any
	if err := proto.Unmarshal(v.Any(), &a); err != nil {
		t.Fatal(err)
	}
	for _, tp2 := range []bool{false, true} {
		var res discoveryv3.Resource
		if err := proto.Unmarshal(append(append([]byte(nil), f.header(tp2, false)...), v.Any()...), &res); err != nil {
			t.Fatal(err)
		}
		if res.Version != "7" || !proto.Equal(res.Resource, &a) {
			t.Errorf("tp2=%v: resource %v", tp2, &res)
		}
		if tp2 {
			got, err := constraint.FromProto(res.GetResourceName().GetDynamicParameterConstraints())
			if res.Name != "" || res.GetResourceName().GetName() != "r" || err != nil || !got.Equal(c) {
				t.Errorf("tp2 resource_name = %v", res.ResourceName)
			}
		} else if res.Name != "r" || res.ResourceName != nil {
			t.Errorf("plain name = %q %v", res.Name, res.ResourceName)
		}
		var w anypb.Any
		whole := append(append(append([]byte(nil), f.wrapped(tp2, false)...), f.header(tp2, false)...), v.Any()...)
		if err := proto.Unmarshal(whole, &w); err != nil || w.TypeUrl != resource.WrapperURL {
			t.Fatalf("wrapped: %v %v", w.TypeUrl, err)
		}
		var inner discoveryv3.Resource
		if err := w.UnmarshalTo(&inner); err != nil || !proto.Equal(&inner, &res) {
			t.Errorf("wrapped inner = %v, %v", &inner, err)
		}
	}
}

// A variant with a TTL carries it in the forms that ask for it
// (docs/protocol.md §2.7), and has a heartbeat: name, version and TTL, no
// payload. One without has none.
func TestFragmentsTTL(t *testing.T) {
	v := routeVariant(t, constraint.Constraints{}, "3")
	v.TTL = 30 * time.Second
	f := encodeFragments(v)
	var res discoveryv3.Resource
	if err := proto.Unmarshal(append(append([]byte(nil), f.header(false, true)...), v.Any()...), &res); err != nil {
		t.Fatal(err)
	}
	if res.GetTtl().AsDuration() != 30*time.Second || res.GetResource() == nil {
		t.Errorf("resource with TTL: %v", &res)
	}
	if err := proto.Unmarshal(append(append([]byte(nil), f.header(false, false)...), v.Any()...), &res); err != nil || res.GetTtl() != nil {
		t.Errorf("resource without TTL: %v %v", &res, err)
	}
	var hb discoveryv3.Resource
	if err := proto.Unmarshal(f.beat(false), &hb); err != nil {
		t.Fatal(err)
	}
	if hb.Name != "r" || hb.Version != "3" || hb.Resource != nil || hb.GetTtl().AsDuration() != 30*time.Second {
		t.Errorf("heartbeat: %v", &hb)
	}
	if encodeFragments(routeVariant(t, constraint.Constraints{}, "3")).beat(false) != nil {
		t.Error("a variant without a TTL has a heartbeat")
	}
}

// The table encodes a variant once, and lets go of it with the variant.
func TestFragmentTableFollowsVariants(t *testing.T) {
	ft := &fragTable{}
	func() {
		v := routeVariant(t, constraint.Constraints{}, "1")
		if first := ft.of(v); ft.of(v) != first {
			t.Error("a variant's fragments encoded twice")
		}
	}()
	entries := func() int {
		n := 0
		ft.m.Range(func(any, any) bool { n++; return true })
		return n
	}
	// Cleanups run on a goroutine of their own after a collection.
	for deadline := time.Now().Add(10 * time.Second); entries() > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries outlive their variants", entries())
		}
		runtime.GC()
	}
}
