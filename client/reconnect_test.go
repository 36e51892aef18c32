package client_test

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// freeAddr reserves a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	return a
}

// The server restarted mid-watch: watchers keep their last values, and the
// client resyncs over delta without downloading again what did not change
// (initial_resource_versions, docs/protocol.md §2.9).
func TestServerRestartResync(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "1") + "---\n" + cluster("b", "1") + "---\n" + cluster("c", "1"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	rs := map[string]*recorder{}
	for _, n := range []string{"a", "b", "c"} {
		rs[n] = newRecorder(t)
		c.Watch(t.Context(), resource.ClusterURL, n, rs[n].handle)
		rs[n].expect(client.Updated, n, `"1"`)
	}
	before := c.Stats()
	o.Stop()
	o.Apply(cluster("b", "2"))
	o.Start()
	rs["b"].expect(client.Updated, "b", `"2"`)
	settled := barrier(t, c, o)
	after := c.Stats()
	// b and the barrier's secret; a and c were not sent again.
	if got := after.Resources - before.Resources; got != 2 {
		t.Errorf("resync downloaded %d resources, want 2 (b and the barrier)", got)
	}
	rs["a"].none(settled)
	rs["c"].none(settled)
}

// The first server cannot be reached: the client falls back to the next
// entry of xds_servers, and returns to the first when it is back.
func TestServerFallbackAndReturn(t *testing.T) {
	backup := testorigin.Start(t)
	backup.Apply(cluster("a", "backup"))
	primaryAddr := freeAddr(t)
	c := newClient(t, bs{servers: []string{primaryAddr, backup.Addr}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
	r.expect(client.Updated, "a", "backup")
	primary := testorigin.New(t, primaryAddr)
	primary.Apply(cluster("a", "primary"))
	primary.Start()
	r.expect(client.Updated, "a", "primary")
}

// failingServer is a gRPC server that accepts every stream and fails it at
// once (as a server that is not an xDS server, or one refusing the
// client's subscriptions, does). It counts the streams and signals each.
type failingServer struct {
	addr    string
	streams atomic.Int64
	opened  chan struct{}
}

func startFailingServer(t *testing.T) *failingServer {
	t.Helper()
	f := &failingServer{opened: make(chan struct{}, 1<<16)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = l.Addr().String()
	g := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		f.streams.Add(1)
		select {
		case f.opened <- struct{}{}:
		default:
		}
		return status.Error(codes.Unimplemented, "not an xDS server")
	}))
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return f
}

// awaitStreams waits for the server's nth stream.
func (f *failingServer) awaitStreams(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(wait)
	for f.streams.Load() < int64(n) {
		select {
		case <-f.opened:
		case <-deadline:
			t.Fatalf("%d streams, waited for %d", f.streams.Load(), n)
		}
	}
}

// A server that fails every stream before answering does not reset the
// backoff: stream attempts are spaced exponentially (BackoffBase, ×1.6,
// ±20% jitter), not retried in a tight loop.
func TestBackoffOnStreamsFailingBeforeAnswering(t *testing.T) {
	f := startFailingServer(t)
	base := 50 * time.Millisecond
	c := newClient(t, bs{servers: []string{f.addr}}.build(t), client.Options{BackoffBase: base, BackoffMax: time.Second})
	start := time.Now()
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	// Five streams take at least four backoffs: 0.8 × (1 + 1.6 + 1.6² +
	// 1.6³) × base.
	f.awaitStreams(t, 5)
	minimum := time.Duration(0.8 * (1 + 1.6 + 1.6*1.6 + 1.6*1.6*1.6) * float64(base))
	if el := time.Since(start); el < minimum {
		t.Errorf("5 streams in %v; backoff allows them no sooner than %v", el, minimum)
	}
	if u := c.Upstreams(); len(u) != 1 || u[0].Connected != "" || u[0].LastError == "" {
		t.Errorf("upstream state %+v, want down with the last error", u)
	}
}

// Servers [failing, working]: the client falls back to the working one,
// and the failing one keeps being retried, with backoff.
func TestFallbackPastFailingServer(t *testing.T) {
	f := startFailingServer(t)
	backup := testorigin.Start(t)
	backup.Apply(cluster("a", "backup"))
	base := 50 * time.Millisecond
	c := newClient(t, bs{servers: []string{f.addr, backup.Addr}}.build(t), client.Options{BackoffBase: base, BackoffMax: time.Second})
	r := newRecorder(t)
	start := time.Now()
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	r.expect(client.Updated, "a", "backup")
	f.awaitStreams(t, 4)
	minimum := time.Duration(0.8 * (1 + 1.6 + 1.6*1.6) * float64(base))
	if el := time.Since(start); el < minimum {
		t.Errorf("4 streams to the failing primary in %v; backoff allows them no sooner than %v", el, minimum)
	}
	r.none(barrier(t, c, backup))
}
