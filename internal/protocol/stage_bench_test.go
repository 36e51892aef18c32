package protocol

import (
	"fmt"
	"runtime"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// stagedRound is fanRig.round for a revision staged for spec: cluster
// names[0] changes, and the streams outside the canary keep its first
// variant (db.Stage.Prev), which they hold already: only the canary's
// streams are sent something. It returns how many were.
func (f *fanRig) stagedRound(tb testing.TB, spec canary.Spec, first *resource.Variant) int {
	f.rev++
	k := resource.Key{Type: resource.ClusterURL, Name: f.names[0]}
	st := &db.Stage{Rev: f.rev, Canary: spec, Prev: map[resource.Key][]*resource.Variant{k: {first}}}
	f.d.Update(db.Update{Rev: f.rev, Puts: []*resource.Variant{cl(f.names[0], int(f.rev)).WithVersion(fmt.Sprint(f.rev))}, Stage: st})
	sent := 0
	for _, s := range f.streams {
		outs := s.collect()
		want := 0
		if spec.Match(s.node.GetId(), nil) {
			want = 1
		}
		if len(outs) != want {
			tb.Fatalf("stream %d (%s): %d responses, want %d", s.id, s.node.GetId(), len(outs), want)
		}
		sent += len(outs)
	}
	return sent
}

// BenchmarkStagedFanout is the fan-out of one changed cluster (of 10) to
// 2,000 streams, as a plain apply (every stream is sent it) and as a revision
// staged for 25% or 100% of them (every stream looks, the canary is sent
// it, the others keep their variant): ns/op is the whole round.
func BenchmarkStagedFanout(b *testing.B) {
	const n, r = 2000, 10
	for _, c := range []struct {
		name  string
		spec  string // "" for a plain apply
		delta bool
	}{
		{"sotw/plain", "", false},
		{"sotw/staged=25%", "25%", false},
		{"sotw/staged=100%", "100%", false},
		{"delta/plain", "", true},
		{"delta/staged=25%", "25%", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := newFanRig(b, n, r, c.delta, false)
			for i, s := range f.streams {
				s.node = &corev3.Node{Id: fmt.Sprintf("node-%06d", i)}
			}
			var first *resource.Variant
			f.d.Read(func(rd *db.Reader) { first = rd.Get(resource.ClusterURL, f.names[0], nil) })
			spec, _ := canary.Parse(c.spec)
			b.ReportAllocs()
			b.ResetTimer()
			sent := 0
			for range b.N {
				if c.spec == "" {
					f.round(b)
					sent += n
				} else {
					sent += f.stagedRound(b, spec, first)
				}
			}
			b.ReportMetric(float64(sent)/float64(b.N), "sent/op")
		})
	}
}

// BenchmarkStagedMemory is what the db holds more while a revision that
// changed m of 10,000 clusters (1 KiB payloads) is staged than after the
// same revision applied plainly: the m variants it replaced, kept for the
// streams outside the canary (B-held is the live heap's difference).
func BenchmarkStagedMemory(b *testing.B) {
	const total = 10000
	for _, m := range []int{100, 1000} {
		b.Run(fmt.Sprintf("changed=%d", m), func(b *testing.B) {
			for range b.N {
				heldPlain := stagedHeap(b, total, m, false)
				heldStaged := stagedHeap(b, total, m, true)
				b.ReportMetric(float64(heldStaged-heldPlain), "B-held")
				b.ReportMetric(float64(heldStaged-heldPlain)/float64(m), "B-held/changed")
			}
		})
	}
}

// stagedHeap builds a db of total clusters, changes m of them as one
// revision (staged for 25% or not) and returns the live heap after a GC.
func stagedHeap(tb testing.TB, total, m int, staged bool) uint64 {
	d := db.New(db.Hooks{})
	pad := fmt.Sprintf("%01024d", 0)
	mk := func(i, round int) *resource.Variant {
		v := cl(fmt.Sprintf("c-%05d", i), round)
		return resource.NewVariant(v.Type, v.Name, v.Constraints, fmt.Sprint(round), "", append(append([]byte(nil), v.Body()...), pad...))
	}
	var puts []*resource.Variant
	for i := range total {
		puts = append(puts, mk(i, 1))
	}
	d.Update(db.Update{Rev: 1, Puts: puts})
	puts = nil
	var changed []*resource.Variant
	prev := map[resource.Key][]*resource.Variant{}
	d.Read(func(r *db.Reader) {
		for i := range m {
			v := mk(i, 2)
			changed = append(changed, v)
			prev[resource.Key{Type: v.Type.URL, Name: v.Name}] = r.Variants(v.Type.URL, v.Name)
		}
	})
	u := db.Update{Rev: 2, Puts: changed}
	if staged {
		spec, _ := canary.Parse("25%")
		u.Stage = &db.Stage{Rev: 2, Canary: spec, Prev: prev}
	}
	prev, changed = nil, nil
	d.Update(u)
	u = db.Update{}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(d)
	return ms.HeapAlloc
}
