package protocol

import (
	"fmt"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// fanRig: n streams each subscribed to the same r clusters (by name, or
// wildcard), driven without gRPC; a round changes one cluster and computes
// and encodes every stream's response — the server's whole fan-out work.
type fanRig struct {
	d       *db.DB
	streams []*stream
	names   []string
	rev     int64
	codec   codec
}

func cl(name string, round int) *resource.Variant {
	body, _ := resource.Marshal(&clusterv3.Cluster{Name: name, AltStatName: fmt.Sprint("round-", round)})
	return resource.NewVariant(resource.ForURL(resource.ClusterURL), name, constraint.Constraints{}, "", "", body)
}

func newFanRig(tb testing.TB, n, r int, delta, wildcard bool) *fanRig {
	srv := NewServer(db.New(db.Hooks{}), Options{})
	f := &fanRig{d: srv.db, codec: codec{proto: nil}}
	var puts []*resource.Variant
	for i := range r {
		f.names = append(f.names, fmt.Sprint("c-", i))
		puts = append(puts, cl(f.names[i], 0).WithVersion("1"))
	}
	f.rev = 1
	f.d.Update(db.Update{Rev: 1, Puts: puts})
	for i := range n {
		st := &stream{srv: srv, delta: delta, id: uint64(i), wake: make(chan struct{}, 1), types: map[string]*typeState{}}
		st.sub = db.NewSubscriber(st.signal)
		ts := st.typeState(resource.ClusterURL)
		ws := f.names
		if wildcard {
			ws = []string{db.Wildcard}
		}
		for _, nm := range ws {
			w := st.newWatch(ts, nm, nil, false)
			if err := subscribeTo(st, ts, w); err != nil {
				tb.Fatal(err)
			}
		}
		ts.markAll(ts.since)
		if outs := st.collect(); len(outs) != 1 {
			tb.Fatalf("initial: %d responses", len(outs))
		}
		f.streams = append(f.streams, st)
	}
	return f
}

func (f *fanRig) round(tb testing.TB) {
	f.rev++
	f.d.Update(db.Update{Rev: f.rev, Puts: []*resource.Variant{cl(f.names[0], int(f.rev)).WithVersion(fmt.Sprint(f.rev))}})
	for _, st := range f.streams {
		outs := st.collect()
		if len(outs) != 1 {
			tb.Fatalf("stream %d: %d responses", st.id, len(outs))
		}
	}
}

// BenchmarkFanout is one change fanned out to n streams × r resources:
// ns/op is the whole round; ns/stream what each stream costs.
func BenchmarkFanout(b *testing.B) {
	for _, c := range []struct {
		name        string
		n, r        int
		delta, wild bool
	}{
		{"sotw/streams=5000/clusters=10", 5000, 10, false, false},
		{"sotw/streams=5000/clusters=100", 5000, 100, false, false},
		{"sotw-wildcard/streams=5000/clusters=100", 5000, 100, false, true},
		{"delta/streams=5000/clusters=100", 5000, 100, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFanRig(b, c.n, c.r, c.delta, c.wild)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f.round(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.n), "ns/stream")
		})
	}
}
