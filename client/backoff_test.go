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
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

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
	backup := servertest.Start(t)
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
	r.none()
}
