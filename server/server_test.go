package server_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

func cluster(timeout time.Duration) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
		ConnectTimeout:       durationpb.New(timeout),
	}
}

// A batch that breaks TP2's rules is rejected whole, with the reason, and
// nothing of it is served; a batch equal to the state makes no revision.
func TestApplyAtomicAndValidated(t *testing.T) {
	srv, err := server.New(context.Background(), server.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	var b server.Batch
	if err := b.Put("a", cluster(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := b.Put("b", cluster(time.Second), constraint.Value("env", "prod")); err != nil {
		t.Fatal(err)
	}
	if err := b.Put("b", cluster(2*time.Second), constraint.Exists("env")); err != nil {
		t.Fatal(err)
	}
	_, err = srv.Apply(ctx, b)
	var overlap *constraint.OverlapError
	if !errors.As(err, &overlap) {
		t.Fatalf("overlapping variants: got %v, want an OverlapError", err)
	}
	b = server.Batch{}
	if err := b.Put("a", cluster(time.Second)); err != nil {
		t.Fatal(err)
	}
	r1, err := srv.Apply(ctx, b)
	if err != nil || r1.Rev != 1 {
		t.Fatalf("first good apply: rev %d, %v; want the first revision", r1.Rev, err)
	}
	r2, err := srv.Apply(ctx, b)
	if err != nil || r2.Rev != 1 || len(r2.Puts) != 0 {
		t.Fatalf("same batch again: %+v, %v; want no new revision", r2, err)
	}
	if err := b.Put("x", &clusterv3.Cluster{ConnectTimeout: durationpb.New(-time.Second)}); err == nil {
		t.Fatal("a cluster with a negative timeout was accepted")
	}
	if err := b.Put("x", cluster(time.Second)); err == nil {
		_, err = srv.Apply(ctx, server.Batch{Deletes: []server.Delete{{Type: resource.ClusterURL, Name: "a", All: true}}, Puts: b.Puts})
		if err == nil {
			t.Fatal("a batch that puts and deletes one resource was accepted")
		}
	}
}

type source struct{ vs chan []*resource.Variant }

func (s source) Resources(context.Context) ([]*resource.Variant, error) { return <-s.vs, nil }

// Follow applies what a source returns and deletes what it no longer
// defines; a client sees both; Clients reports the client with its ACK.
func TestFollowAndClients(t *testing.T) {
	dir := t.TempDir()
	st, err := server.OpenBolt(filepath.Join(dir, "xdsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server (cleanups run last first)
	srv, addr := serveStore(t, st)

	put := func(names ...string) []*resource.Variant {
		var b server.Batch
		for _, n := range names {
			if err := b.Put(n, cluster(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		return b.Puts
	}
	src := source{vs: make(chan []*resource.Variant)}
	trigger := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- srv.Follow(ctx, src, trigger) }()
	src.vs <- put("a", "b")

	c := newClient(addr, nil)
	defer c.Close()
	events := make(chan client.Event, 16)
	stop, err := c.Watch(ctx, resource.ClusterURL, "b", func(e client.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	waitKind(t, events, client.Updated)

	trigger <- struct{}{}
	src.vs <- put("a")
	waitKind(t, events, client.Removed)

	deadline := time.After(20 * time.Second)
	for {
		cs := srv.Streams()
		if len(cs) == 1 && len(cs[0].Types) > 0 && cs[0].NodeID == "example" {
			ts := cs[0].Types[0]
			if ts.URL == resource.ClusterURL && len(ts.Held) == 1 && ts.Held[0].Absent {
				break
			}
		}
		select {
		case <-deadline:
			t.Fatalf("clients: %+v", cs)
		case <-time.After(10 * time.Millisecond): // polling a status, not waiting for an event
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitKind(t *testing.T, events chan client.Event, k client.EventKind) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Kind == k {
				return
			}
		case <-deadline:
			t.Fatalf("no %v event", k)
		}
	}
}

// One TP2 variant is deleted by its constraints; the others stay. A
// server on a bolt file serves, after a restart, the versions it served
// before.
func TestDeleteVariantAndRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	st, err := server.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Options{Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var b server.Batch
	for _, env := range []string{"prod", "test"} {
		if err := b.Put("c", cluster(time.Second), constraint.Value("env", env)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	r, err := srv.Apply(ctx, server.Batch{Deletes: []server.Delete{{Type: resource.ClusterURL, Name: "c", Constraints: constraint.Value("env", "test")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Deletes) != 1 || r.Deletes[0].Constraints != constraint.Value("env", "test").Key() || r.Rev != 2 {
		t.Fatalf("delete of one variant: %+v", r)
	}
	srv.Close()
	st.Close()

	st, err = server.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server (cleanups run last first)
	_, addr := serveStore(t, st)
	c := newClient(addr, map[string]string{"env": "prod"})
	defer c.Close()
	events := make(chan client.Event, 16)
	stop, err := c.Watch(ctx, resource.ClusterURL, "c", func(e client.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case e := <-events:
		if e.Kind != client.Updated || !strings.HasPrefix(e.Variant.Version, "1-") || e.Variant.Constraints.Key() != constraint.Value("env", "prod").Key() {
			t.Fatalf("after restart: %v %v %v", e.Kind, e.Variant.Version, e.Variant.Constraints)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no value after restart")
	}
}

// serveStore serves st on a loopback port until the test ends.
func serveStore(t *testing.T, st *server.Store) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(context.Background(), server.Options{Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	return srv, lis.Addr().String()
}

// New on a store that cannot be read (closed) fails at once, saying why,
// rather than waiting for ever for a state it will never load; an Apply
// after Close fails the same way rather than waiting to be served.
func TestNewOnClosedStoreFails(t *testing.T) {
	st, err := server.OpenBolt(filepath.Join(t.TempDir(), "xdsd.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := server.New(ctx, server.Options{Store: st, Logger: quiet})
	if err == nil {
		srv.Close()
		t.Fatal("New on a closed store: no error")
	}
	if ctx.Err() != nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("New on a closed store: %v (after %v), want at once an error saying it is closed", err, ctx.Err())
	}

	srv, err = server.New(ctx, server.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	var b server.Batch
	if err := b.Put("a", cluster(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Apply(ctx, b); err == nil || ctx.Err() != nil {
		t.Fatalf("Apply after Close: %v (after %v), want at once an error", err, ctx.Err())
	}
}

// With TuneGC, Apply gives GOGC back as it found it; without, it never
// touches it (internal/tuning has the policy's own tests).
func TestTuneGCRestoresGOGC(t *testing.T) {
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	for _, tune := range []bool{false, true} {
		srv, err := server.New(context.Background(), server.Options{Logger: quiet, TuneGC: tune})
		if err != nil {
			t.Fatal(err)
		}
		var b server.Batch
		if err := b.Put("a", cluster(time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Apply(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if got := debug.SetGCPercent(150); got != 150 {
			t.Errorf("TuneGC %v: GOGC %d after an Apply, want 150 as before", tune, got)
		}
	}
}
