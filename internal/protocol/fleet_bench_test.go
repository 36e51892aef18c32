package protocol_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

// fleetOf builds a server with n idle streams in 40 groups (env × zone);
// the first hot of them subscribe to cluster "hot", each of the others
// to a cluster of its own. Its admin handler reads the fleet index as
// xdsd serve's does.
func fleetOf(b *testing.B, n, hot int) (*protocol.Server, http.Handler) {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	srv := protocol.NewServer(db.New(db.Hooks{}), protocol.Options{Logger: log})
	for i := range n {
		p := constraint.Params{"env": []string{"prod", "test"}[i%2], "zone": fmt.Sprint("z", i%20)}
		name := "hot"
		if i >= hot {
			name = fmt.Sprint("cold-", i)
		}
		protocol.AddIdleStream(srv, fmt.Sprintf("node-%06d", i), p, resource.ClusterURL, name)
	}
	st := mem.New()
	b.Cleanup(func() { st.Close() })
	h := admin.Handler(admin.Options{Store: st, Logger: log,
		Clients: func() any { return srv.Streams() },
		Groups:  func(context.Context) ([]fleet.Group, error) { return srv.Groups(), nil },
		Page:    func(_ context.Context, q protocol.ClientQuery) (protocol.ClientPage, error) { return srv.Page(q), nil },
		Concerned: func(_ context.Context, ch protocol.Changed) ([]protocol.StreamStatus, error) {
			return srv.Concerned(ch), nil
		},
		Rollout: func(rev int64, changes []store.Change) rollout.Report {
			return rollout.Status(srv.Concerned(rollout.Names(changes)), rev, changes, func(typeURL, name string) []*resource.Variant {
				vs, _ := st.StateAt(context.Background(), st.Rev(), store.Filter{Type: typeURL, Name: name})
				return vs
			})
		},
	})
	return srv, h
}

// cpuTime is the process's CPU time so far: on a machine shared with
// other work, the benchmarks report it per operation beside ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

func clusterDoc(name string, i int) string {
	return fmt.Sprintf("name: %s\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  alt_stat_name: v%d\n", name, i)
}

func apply(b *testing.B, h http.Handler, body string) {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/apply?source=body", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("apply: %d %s", rec.Code, rec.Body)
	}
}

// Who a change concerns costs its subscribers, not the fleet: the
// question the stranded-client guard and every rollout ask.
func BenchmarkFleetConcerned(b *testing.B) {
	for _, n := range []int{2000, 20000, 100000} {
		for _, hot := range []int{0, 1000} {
			b.Run(fmt.Sprintf("streams=%d/subscribers=%d", n, hot), func(b *testing.B) {
				srv, _ := fleetOf(b, n, hot)
				ch := protocol.Changed{resource.ClusterURL: {"hot"}}
				b.ResetTimer()
				start := cpuTime()
				for b.Loop() {
					if got := len(srv.Concerned(ch)); got != hot {
						b.Fatalf("%d concerned, want %d", got, hot)
					}
				}
				reportCPU(b, start)
			})
		}
	}
}

// An apply of one cluster through the admin API, its guard included,
// with n idle streams of which hot subscribe to it.
func BenchmarkFleetApply(b *testing.B) {
	for _, n := range []int{0, 2000, 100000} {
		for _, hot := range []int{0, 1000} {
			if hot > n {
				continue
			}
			b.Run(fmt.Sprintf("streams=%d/subscribers=%d", n, hot), func(b *testing.B) {
				_, h := fleetOf(b, n, hot)
				i := 0
				b.ResetTimer()
				start := cpuTime()
				for b.Loop() {
					i++
					apply(b, h, clusterDoc("hot", i))
				}
				reportCPU(b, start)
			})
		}
	}
}

// The admin page with 100,000 connected clients: groups, the rollout of
// the latest revisions by group (1,000 concerned clients each), the first
// page of clients. ns/op is its answer time, bytes/page its size.
func BenchmarkFleetPage(b *testing.B) {
	_, h := fleetOf(b, 100000, 1000)
	for i := range 3 {
		apply(b, h, clusterDoc("hot", i))
	}
	size := 0
	b.ResetTimer()
	start := cpuTime()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("page: %d", rec.Code)
		}
		size = rec.Body.Len()
		io.Copy(io.Discard, rec.Body)
	}
	reportCPU(b, start)
	b.ReportMetric(float64(size), "bytes/page")
}
