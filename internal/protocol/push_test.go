package protocol

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/grpc/encoding"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// pushRig is a server with n streams subscribed to one cluster, driven
// without gRPC so that only the server's own work per pushed response is
// measured: the db fan-out, computing what to send, and encoding it into
// the buffers handed to the transport.
type pushRig struct {
	d        *db.DB
	streams  []*stream
	variants [2]*resource.Variant
	codec    codec
	rev      int64
}

func newPushRig(tb testing.TB, n, size int, delta, tp2 bool) *pushRig {
	srv := NewServer(db.New(db.Hooks{}), Options{})
	r := &pushRig{d: srv.db, codec: codec{proto: encoding.GetCodecV2("proto")}}
	cons := constraint.Constraints{}
	if tp2 {
		cons = constraint.MustParse("env=prod")
	}
	for i := range r.variants {
		body, err := resource.Marshal(&clusterv3.Cluster{Name: "c", AltStatName: strings.Repeat(fmt.Sprint(i), size)})
		if err != nil {
			tb.Fatal(err)
		}
		r.variants[i] = resource.NewVariant(resource.ForURL(resource.ClusterURL), "c", cons, "", "", body)
	}
	for i := range n {
		st := &stream{srv: srv, delta: delta, id: uint64(i), wake: make(chan struct{}, 1), types: map[string]*typeState{}}
		st.sub = db.NewSubscriber(st.signal)
		ts := st.typeState(resource.ClusterURL)
		w := st.newWatch(ts, "c", map[string]string{"env": "prod"}, tp2)
		if err := subscribeTo(st, ts, w); err != nil {
			tb.Fatal(err)
		}
		ts.markAll(ts.since)
		r.streams = append(r.streams, st)
	}
	r.push(tb) // the initial responses
	return r
}

// newVHDSPushRig is newPushRig for on-demand VHDS: n delta streams each
// subscribed to "rc/www.example.com", which resolves by domain to the
// virtual host "rc/www" (answers carry the alias, docs/protocol.md §5.4).
func newVHDSPushRig(tb testing.TB, n, size int) *pushRig {
	srv := NewServer(db.New(db.Hooks{}), Options{})
	r := &pushRig{d: srv.db, codec: codec{proto: encoding.GetCodecV2("proto")}}
	for i := range r.variants {
		body, err := resource.Marshal(&routev3.VirtualHost{Name: "rc/www", Domains: []string{"www.example.com"},
			RequestHeadersToRemove: []string{strings.Repeat(fmt.Sprint(i), size)}})
		if err != nil {
			tb.Fatal(err)
		}
		r.variants[i] = resource.NewVariant(resource.ForURL(resource.VirtualHostURL), "rc/www", constraint.Constraints{}, "", "", body)
	}
	r.d.Update(db.Update{Rev: 1, Puts: []*resource.Variant{r.variants[1].WithVersion("1")}})
	r.rev = 1
	for i := range n {
		st := &stream{srv: srv, delta: true, id: uint64(i), wake: make(chan struct{}, 1), types: map[string]*typeState{}}
		st.sub = db.NewSubscriber(st.signal)
		ts := st.typeState(resource.VirtualHostURL)
		w := st.newWatch(ts, "rc/www.example.com", nil, false)
		if err := subscribeTo(st, ts, w); err != nil {
			tb.Fatal(err)
		}
		ts.markAll(ts.since)
		if outs := st.collect(); len(outs) != 1 {
			tb.Fatalf("initial: %d responses", len(outs))
		}
		r.streams = append(r.streams, st)
	}
	return r
}

// push makes one change and sends it to every stream; it returns the
// bytes handed to the transport per stream.
func (r *pushRig) push(tb testing.TB) int {
	r.rev++
	v := r.variants[r.rev%2].WithVersion(fmt.Sprint(r.rev))
	r.d.Update(db.Update{Rev: r.rev, Puts: []*resource.Variant{v}})
	n := 0
	for _, st := range r.streams {
		outs := st.collect()
		if len(outs) != 1 {
			tb.Fatalf("stream %d: %d responses", st.id, len(outs))
		}
		bs, err := r.codec.Marshal(&outs[0].enc)
		if err != nil {
			tb.Fatal(err)
		}
		n = bs.Len()
	}
	return n
}

// allocsPerResponse is the average number of heap allocations per pushed
// response, the change itself (one variant, made once) included.
func allocsPerResponse(tb testing.TB, n, size int, delta, tp2 bool) float64 {
	r := newPushRig(tb, n, size, delta, tp2)
	const rounds = 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		r.push(tb)
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(rounds*n)
}

// docs/architecture.md §5 "Marshal once": a variant is marshaled when it enters the
// db, never per client, and identical responses are encoded once. So the
// allocations per pushed response must not grow with the resource's size
// or with the number of streams.
func TestMarshalOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are slow under -short")
	}
	for _, mode := range []struct {
		name       string
		delta, tp2 bool
	}{{"sotw", false, false}, {"delta", true, false}, {"delta-tp2", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			small := allocsPerResponse(t, 10, 100, mode.delta, mode.tp2)
			big := allocsPerResponse(t, 10, 64<<10, mode.delta, mode.tp2)
			many := allocsPerResponse(t, 200, 100, mode.delta, mode.tp2)
			t.Logf("allocs/response: 100 B × 10 streams %.1f, 64 KiB × 10 streams %.1f, 100 B × 200 streams %.1f", small, big, many)
			// A resource's bytes are copied by nobody but the transport: a
			// 640x larger payload may not cost one allocation more.
			if big > small+1 {
				t.Errorf("allocations grow with resource size: %.1f → %.1f", small, big)
			}
			if many > small+1 {
				t.Errorf("allocations per response grow with streams: %.1f → %.1f", small, many)
			}
		})
	}
}

// bytesPerResponse is the average number of bytes allocated per pushed
// response.
func bytesPerResponse(tb testing.TB, r *pushRig) float64 {
	const rounds = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		r.push(tb)
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(rounds*len(r.streams))
}

// On-demand VHDS answers carry the alias each client asked by, yet streams
// that asked alike get one encoding: the bytes allocated per response do
// not grow with the virtual host's size.
func TestVHDSMarshalOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are slow under -short")
	}
	small := bytesPerResponse(t, newVHDSPushRig(t, 20, 100))
	big := bytesPerResponse(t, newVHDSPushRig(t, 20, 64<<10))
	t.Logf("bytes allocated per VHDS response: 100 B vhost %.0f, 64 KiB vhost %.0f", small, big)
	// Encoded per stream, each response would cost more than the virtual
	// host itself; encoded once per change, the 20 streams share it.
	if big > 32<<10 {
		t.Errorf("a VHDS answer is encoded per stream: %.0f bytes per response for a 64 KiB virtual host (%.0f for 100 B)", big, small)
	}
}

// BenchmarkPush measures the server's work per pushed response (see
// pushRig): time, bytes and allocations, by mode, resource size and
// stream count.
func BenchmarkPush(b *testing.B) {
	for _, mode := range []struct {
		name       string
		delta, tp2 bool
	}{{"sotw", false, false}, {"delta", true, false}, {"delta-tp2", true, true}} {
		for _, size := range []int{100, 64 << 10} {
			for _, n := range []int{1, 1000} {
				b.Run(fmt.Sprintf("%s/size=%d/streams=%d", mode.name, size, n), func(b *testing.B) {
					r := newPushRig(b, n, size, mode.delta, mode.tp2)
					b.ReportAllocs()
					b.ResetTimer()
					var wire int
					for range b.N {
						wire = r.push(b)
					}
					b.StopTimer()
					per := float64(b.Elapsed().Nanoseconds()) / float64(b.N*n)
					b.ReportMetric(per, "ns/response")
					b.ReportMetric(float64(wire), "wire-bytes/response")
				})
			}
		}
	}
}

// subscribeTo subscribes st to w on ts as a request does: it is answered
// even if the client holds what it covers.
func subscribeTo(st *stream, ts *typeState, w *db.Sub) error {
	st.mu.Lock()
	c := st.change(ts)
	if _, err := c.add(w); err != nil {
		st.mu.Unlock()
		return err
	}
	c.force = append(c.force, w)
	st.apply(c)
	return nil
}
