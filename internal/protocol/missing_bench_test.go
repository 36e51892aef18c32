package protocol_test

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// manyNames makes n distinct names of prefix, each of at least size bytes.
func manyNames(prefix string, n, size int) []string {
	out := make([]string, n)
	for i := range out {
		s := fmt.Sprintf("%s-%06d", prefix, i)
		if len(s) < size {
			s += strings.Repeat("x", size-len(s))
		}
		out[i] = s
	}
	return out
}

// BenchmarkMissingNames: one delta request subscribing n names that do
// not exist, until its answer (every name in removed_resources). The
// answer's removed list was built in time quadratic in n. cpu-ms/op is
// the process's CPU time (client and server), steadier than the time on
// a loaded machine.
//
//	go test -run '^$' -bench BenchmarkMissingNames -benchtime 3x ./internal/protocol/
func BenchmarkMissingNames(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d := db.New(db.Hooks{})
			ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			_, conn := protocoltest.Serve(b, ps.Register)
			ns := manyNames("missing", n, 16)
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := protocoltest.NewDelta(b, conn, node(fmt.Sprint("b-", i), nil))
				c.Sub(resource.ClusterURL, ns...)
				select {
				case r := <-c.Resps:
					if len(r.RemovedResources) != n {
						b.Fatalf("%d names removed, want %d", len(r.RemovedResources), n)
					}
				case err := <-c.Errs:
					b.Fatal(err)
				case <-time.After(10 * time.Minute):
					b.Fatal("no answer")
				}
				c.Close()
			}
			reportCPU(b, cpu0)
		})
	}
}
