package etcd_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// BenchmarkApply measures apply throughput into bolt and into etcd (one
// local member) for batches of 1, 1,000 and 100,000 Clusters, in
// resources per second; each batch changes every resource it names.
// BENCHMARKS.md: go test -run '^$' -bench Apply -benchtime 3x ./internal/store/etcd/
func BenchmarkApply(b *testing.B) {
	c := etcdtest.Start(b, 1)
	for _, size := range []int{1, 1000, 100000} {
		for _, backend := range []string{"bolt", "etcd"} {
			b.Run(fmt.Sprintf("%s/%d", backend, size), func(b *testing.B) {
				var s store.Store
				var err error
				if backend == "bolt" {
					s, err = bolt.Open(filepath.Join(b.TempDir(), "xdsd.db"), bolt.Options{})
				} else {
					s, err = etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: freshPrefix()})
				}
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				batches := make([]store.Batch, b.N)
				for i := range batches {
					batches[i] = store.Batch{Puts: clusters(size, "c", fmt.Sprint(i))}
				}
				b.ResetTimer()
				for i := range b.N {
					if _, err := s.Apply(context.Background(), batches[i]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "resources/s")
			})
		}
	}
}

// BenchmarkReplicaStart measures how long a replica takes to open on
// 100,000 stored resources (one batch): the time from Open to serving.
func BenchmarkReplicaStart(b *testing.B) {
	c := etcdtest.Start(b, 1)
	p := freshPrefix()
	w, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: p})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Apply(context.Background(), store.Batch{Puts: clusters(100000, "c", "1")}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: p})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/start")
		s.Close()
	}
}
