package origin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// BenchmarkRestart is what `xdsd serve` does at a restart on bolt, until
// it is ready: open the file (Preload, as serve does) and load every
// variant into the server's db. XDSD_BENCH_STORE names a bolt file to
// restart on (copy it first: the benchmark opens it for writing), e.g. the
// million of BENCHMARKS.md's section "A million variants"; without it, a
// store of 100,000 clusters is made in a temporary directory.
//
//	XDSD_BENCH_STORE=/tmp/m.db go test -run '^$' -bench Restart -benchtime 3x -cpuprofile cpu.out ./internal/origin/
func BenchmarkRestart(b *testing.B) {
	path := os.Getenv("XDSD_BENCH_STORE")
	if path == "" {
		path = filepath.Join(b.TempDir(), "xdsd.db")
		st, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		vs := make([]*resource.Variant, 100_000)
		for i := range vs {
			vs[i] = storetest.Cluster(fmt.Sprintf("c%d", i), "", "x")
		}
		if _, err := st.Apply(context.Background(), store.Batch{Puts: vs}); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for b.Loop() {
		st, err := bolt.Open(path, bolt.Options{Preload: true})
		if err != nil {
			b.Fatal(err)
		}
		srv := origin.New(st, origin.Options{Logger: quiet})
		srv.Start()
		if err := srv.WaitRev(ctx, st.Rev()); err != nil {
			b.Fatal(err)
		}
		srv.Close()
		st.Close()
	}
}
