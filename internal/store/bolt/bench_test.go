package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// BenchmarkApplyLarge applies batches of 100,000 small Clusters, each
// changing every one, to a bolt store: the store alone, no decoding.
//
//	go test -run '^$' -bench ApplyLarge -benchtime 3x ./internal/store/bolt/
func BenchmarkApplyLarge(b *testing.B) {
	s, err := bolt.Open(filepath.Join(b.TempDir(), "xdsd.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batches := make([]store.Batch, b.N)
	for i := range batches {
		vs := make([]*resource.Variant, 100000)
		for j := range vs {
			vs[j] = storetest.Cluster(fmt.Sprintf("c%d", j), "", fmt.Sprint(i))
		}
		batches[i] = store.Batch{Puts: vs}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Apply(context.Background(), batches[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100000*b.N)/b.Elapsed().Seconds(), "resources/s")
}
