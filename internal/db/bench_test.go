package db

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// BenchmarkUpdateFanout is the db's part of a fan-out: one resource
// changes and every subscriber of it is marked and signalled (the streams'
// work after that is protocol's BenchmarkFanout).
func BenchmarkUpdateFanout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, kind := range []string{"named", "wildcard"} {
			b.Run(fmt.Sprintf("%s/subscribers=%d", kind, n), func(b *testing.B) {
				d := New(Hooks{})
				var subs []*Subscriber
				for range n {
					s, _ := newSub()
					nm := "c"
					if kind == "wildcard" {
						nm = Wildcard
					}
					d.Subscribe(s, NewSub(resource.ClusterURL, nm, nil))
					subs = append(subs, s)
				}
				vs := []*resource.Variant{storetest.Cluster("c", "", "a"), storetest.Cluster("c", "", "b")}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					d.Update(Update{Rev: int64(i + 1), Puts: []*resource.Variant{vs[i%2]}})
					b.StopTimer()
					for _, s := range subs {
						s.DrainFunc(func(Changed) {}) // as streams do: the set is kept for reuse
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/subscriber")
			})
		}
	}
}

// BenchmarkGetVariant is choosing a client's variant among eight by its
// dynamic parameters (TP2), as every response for a TP2 subscription does.
func BenchmarkGetVariant(b *testing.B) {
	d := New(Hooks{})
	var puts []*resource.Variant
	for i := range 8 {
		puts = append(puts, storetest.Cluster("c", fmt.Sprintf("env=e%d && region=r%d", i%4, i/4), fmt.Sprint(i)))
	}
	d.Update(Update{Rev: 1, Puts: puts})
	params := constraint.Params{"env": "e3", "region": "r1", "zone": "z"}
	b.ReportAllocs()
	for b.Loop() {
		d.Read(func(r *Reader) {
			if r.Get(resource.ClusterURL, "c", params) == nil {
				b.Fatal("no variant")
			}
		})
	}
}
