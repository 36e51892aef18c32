package protocol

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
)

// A caching proxy (HonorDoNotCache) must not answer a new subscription
// from a do_not_cache copy older than it, even when another stream
// subscribed alike computed, at the same revision, a response that holds
// that copy: the two are not in step, and must not share the computation.
func TestMemoRespectsDoNotCache(t *testing.T) {
	for _, delta := range []bool{false, true} {
		srv := NewCacheServer(db.NewCache(db.Hooks{}), Options{}, cachepolicy.Policy{HonorDoNotCache: true})
		subscribe := func(id uint64) *stream {
			st := &stream{srv: srv, delta: delta, id: id, wake: make(chan struct{}, 1), types: map[string]*typeState{}}
			st.sub = db.NewSubscriber(st.signal)
			ts := st.typeState(resource.RouteURL)
			w := st.newWatch(ts, "private", nil, false)
			if err := subscribeTo(st, ts, w); err != nil {
				t.Fatal(err)
			}
			ts.markAll(ts.since)
			return st
		}
		names := func(outs []out) []string {
			var ns []string
			for _, o := range outs {
				d := decodeOut(t, o, delta)
				ns = append(ns, d...)
			}
			return ns
		}
		// a subscribes before the copy exists, so the copy fetched for it
		// is its to have.
		a := subscribe(1)
		srv.db.Update(db.Update{Rev: 1, Puts: []*resource.Variant{storetest.Route("private", "", "x").WithDoNotCache(true).WithVersion("1")}})
		if got := names(a.collect()); len(got) != 1 || got[0] != "private" {
			t.Fatalf("delta=%v: first subscriber got %v, want [private]", delta, got)
		}
		// b subscribes now, at the same revision: the cached copy predates
		// it, and a fresh one is on its way, so b is sent nothing yet.
		b := subscribe(2)
		for _, n := range names(b.collect()) {
			if n == "private" {
				t.Fatalf("delta=%v: second subscriber answered from a do_not_cache copy", delta)
			}
		}
		// The fresh copy reaches b.
		srv.db.Update(db.Update{Rev: 2, Puts: []*resource.Variant{storetest.Route("private", "", "y").WithDoNotCache(true).WithVersion("2")}})
		if got := names(b.collect()); len(got) != 1 || got[0] != "private" {
			t.Fatalf("delta=%v: second subscriber got %v after the refetch, want [private]", delta, got)
		}
	}
}

// decodeOut decodes a computed response as a client would, and names
// its resources.
func decodeOut(t *testing.T, o out, delta bool) []string {
	t.Helper()
	bs, err := (codec{proto: encoding.GetCodecV2("proto")}).Marshal(&o.enc)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	if delta {
		var r discoveryv3.DeltaDiscoveryResponse
		if err := proto.Unmarshal(bs.Materialize(), &r); err != nil {
			t.Fatal(err)
		}
		for _, res := range r.Resources {
			ns = append(ns, res.Name)
		}
		return ns
	}
	var r discoveryv3.DiscoveryResponse
	if err := proto.Unmarshal(bs.Materialize(), &r); err != nil {
		t.Fatal(err)
	}
	for _, a := range r.Resources {
		var rc routev3.RouteConfiguration
		if err := a.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, rc.Name)
	}
	return ns
}
