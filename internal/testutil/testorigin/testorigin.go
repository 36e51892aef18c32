// Package testorigin runs a real xdsd server in-process for tests: a bbolt
// store, the db, protocol and a gRPC server on loopback. It can be stopped
// and started again on the same address with the same store, as a
// restarted server. Only tests import it.
package testorigin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

// Wait bounds every wait of this package: testutil.Wait, generous on
// purpose, since every wait is for something on its way.
const Wait = testutil.Wait

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Origin is an xdsd server under test.
type Origin struct {
	T    testing.TB
	Path string // the store file
	Addr string // the xDS address; set by Start when it was 127.0.0.1:0
	St   store.Store
	Srv  *origin.Server
	// Guard, when set before Start, is the policy its streams are held to.
	Guard protocol.Guard

	g *grpc.Server
}

// Start runs a server with a new store on a free loopback port, stopped
// when the test ends.
func Start(t testing.TB) *Origin {
	t.Helper()
	o := New(t, "127.0.0.1:0")
	o.Start()
	return o
}

// New prepares a server with a new store that will listen on addr (for a
// server that must come up later, on an address known now); Start starts
// it. It is stopped when the test ends.
func New(t testing.TB, addr string) *Origin {
	o := &Origin{T: t, Path: filepath.Join(t.TempDir(), "xdsd.db"), Addr: addr}
	t.Cleanup(o.Stop)
	return o
}

// Start starts (or restarts) the server and waits until it serves its
// store.
func (o *Origin) Start() {
	o.T.Helper()
	st, err := bolt.Open(o.Path, bolt.Options{})
	if err != nil {
		o.T.Fatal(err)
	}
	lis, err := listen(o.Addr)
	if err != nil {
		st.Close()
		o.T.Fatal(err)
	}
	o.Addr = lis.Addr().String()
	o.St = st
	o.Srv = origin.New(st, origin.Options{Logger: Quiet, Protocol: protocol.Options{Guard: o.Guard}})
	o.g = grpc.NewServer(protocol.ServerOptions()...)
	o.Srv.Register(o.g)
	o.Srv.Start()
	go o.g.Serve(lis)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := o.Srv.WaitRev(ctx, st.Rev()); err != nil {
		o.T.Fatal(err)
	}
}

// Running reports whether the server is up.
func (o *Origin) Running() bool { return o.g != nil }

// Stop stops the server (as a crash would: streams end at once).
func (o *Origin) Stop() {
	if o.g == nil {
		return
	}
	o.Srv.Close()
	o.g.Stop()
	o.St.Close()
	o.g = nil
}

// Apply applies authoring YAML as one batch and, when the server runs,
// waits until it serves it. A stopped server's store is changed offline.
func (o *Origin) Apply(yaml string) {
	o.T.Helper()
	docs, err := resource.Decode("test", []byte(yaml))
	if err != nil {
		o.T.Fatal(err)
	}
	var b store.Batch
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
	}
	o.Commit(b)
}

// Remove deletes every variant of a resource.
func (o *Origin) Remove(typ, name string) {
	o.T.Helper()
	t, err := resource.Lookup(typ)
	if err != nil {
		o.T.Fatal(err)
	}
	o.Commit(store.Batch{Deletes: []store.Delete{{Type: t.URL, Name: name, All: true}}})
}

// Commit applies a batch and waits until the server serves it.
func (o *Origin) Commit(b store.Batch) {
	o.T.Helper()
	if !o.Running() {
		st, err := bolt.Open(o.Path, bolt.Options{})
		if err != nil {
			o.T.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Apply(context.Background(), b); err != nil {
			o.T.Fatal(err)
		}
		return
	}
	res, err := o.St.Apply(context.Background(), b)
	if err != nil {
		o.T.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := o.Srv.WaitRev(ctx, res.Rev); err != nil {
		o.T.Fatal(err)
	}
}

// Subscriptions counts the server's subscriptions to a name, over all
// streams.
func (o *Origin) Subscriptions(name string) int {
	n := 0
	for _, c := range o.Srv.Streams() {
		for _, ty := range c.Types {
			for _, s := range ty.Subscriptions {
				if s.Name == name {
					n++
				}
			}
		}
	}
	return n
}

// listen binds addr. A server started again on its old port can find it
// held for a moment: a client reconnecting to a port nothing listens on may
// be connected to itself by the kernel (TCP self-connect), from that very
// port; its gRPC connection fails at once and frees the port. So a busy
// port is tried again, for a while.
func listen(addr string) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return lis, err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-tick.C:
		case <-deadline:
			return nil, err
		}
		if lis, err = net.Listen("tcp", addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return lis, err
		}
	}
}
