package protocol_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/policy"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

func mustPolicy(t *testing.T, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(src), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Rules without clients cover the streams of these tests (no mTLS, so no
// identity): clusters named public-*, and the barrier secrets.
const publicPolicy = `rules:
- types: [cds]
  names: ["public-*"]
- types: [sds]
`

func withGuard(g protocol.Guard) func(*protocol.Options) {
	return func(o *protocol.Options) { o.Guard = g }
}

// SotW: what the policy denies is never sent, named or by wildcard.
func TestGuardSotW(t *testing.T) {
	h := newHarness(t, withGuard(mustPolicy(t, publicPolicy)))
	h.put(cluster("public-a"), cluster("private-b"))

	wild := h.sotw(node("wild", nil))
	wild.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
	r := wild.Recv()
	if got := sotwNames(t, r); !slices.Equal(got, []string{"public-a"}) {
		t.Fatalf("wildcard: %v, want only public-a", got)
	}
	wild.Ack(r)

	named := h.sotw(node("named", nil))
	named.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"public-a", "private-b"}})
	r = named.Recv()
	if got := sotwNames(t, r); !slices.Equal(got, []string{"public-a"}) {
		t.Fatalf("named: %v, want only public-a", got)
	}
	named.Ack(r, "public-a", "private-b")

	// A change of a denied resource sends nothing; one of an allowed
	// one, only what is allowed.
	h.put(cluster("private-c"))
	h.put(cluster("public-d"))
	r = wild.Recv()
	if got := sotwNames(t, r); !slices.Equal(got, []string{"public-a", "public-d"}) {
		t.Fatalf("wildcard after changes: %v", got)
	}
	wild.Ack(r)
	wild.Barrier(h.putSecret)
}

// Delta: a denied named subscription is answered as removed (as if it did
// not exist); a wildcard leaves denied names out.
func TestGuardDelta(t *testing.T) {
	h := newHarness(t, withGuard(mustPolicy(t, publicPolicy)))
	h.put(cluster("public-a"), cluster("private-b"))

	d := h.delta(node("d", nil))
	d.Sub(resource.ClusterURL, "public-a", "private-b")
	r := d.Recv()
	if len(r.Resources) != 1 || r.Resources[0].Name != "public-a" || !slices.Equal(r.RemovedResources, []string{"private-b"}) {
		t.Fatalf("named: %s", describe(r))
	}
	d.Ack(r)

	w := h.delta(node("w", nil))
	w.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL})
	r = w.Recv()
	if len(r.Resources) != 1 || r.Resources[0].Name != "public-a" || len(r.RemovedResources) != 0 {
		t.Fatalf("wildcard: %s", describe(r))
	}
	w.Ack(r)
	h.put(cluster("private-b"), cluster("private-c"))
	w.Barrier(h.putSecret)
	d.Barrier(h.putSecret)
}

// Streams in step share computations (memo.go), but not across
// identities the policy tells apart: each gets its own names.
func TestGuardIdentities(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	srvCert := ca.Leaf(t, testpki.LeafOpts{Server: true})
	d := db.New(db.Hooks{})
	ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Guard: mustPolicy(t, `rules:
- clients: ["spiffe://t/a"]
  names: ["a-*"]
- clients: ["spiffe://t/b"]
  names: ["b-*"]
`)})
	g := grpc.NewServer(protocol.ServerCodec(), grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{srvCert.TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})))
	ps.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn := func(id string) *grpc.ClientConn {
		c, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Leaf(t, testpki.LeafOpts{URI: id}).TLS}})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	h := &harness{t: t, db: d, srv: ps}
	h.put(cluster("a-1"), cluster("b-1"))
	streams := map[string]*protocoltest.SotW{}
	for _, id := range []string{"a", "b"} {
		s := protocoltest.NewSotW(t, conn("spiffe://t/"+id), node(id, nil))
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
		r := s.Recv()
		if got := sotwNames(t, r); !slices.Equal(got, []string{id + "-1"}) {
			t.Fatalf("%s: %v", id, got)
		}
		s.Ack(r)
		streams[id] = s
	}
	h.put(cluster("a-2"), cluster("b-2"))
	for id, s := range streams {
		if got := sotwNames(t, s.Recv()); !slices.Equal(got, []string{id + "-1", id + "-2"}) {
			t.Errorf("%s after a change: %v", id, got)
		}
	}
	for _, c := range ps.Streams() {
		if c.Identity != "spiffe://t/"+c.NodeID {
			t.Errorf("client %s has identity %q", c.NodeID, c.Identity)
		}
	}
}

// Issue 27 point 5: a glob whose members the policy all denies is
// answered exactly as an empty glob is, so that its answer shows nothing
// of them (before, it was never answered, which told that members
// existed).
func TestGuardDeniedGlobIsEmpty(t *testing.T) {
	const (
		lds    = "xdstp://a/envoy.config.listener.v3.Listener/"
		secret = lds + "secret/*"
		empty  = lds + "none/*"
	)
	h := newHarness(t, withGuard(mustPolicy(t, `rules:
- types: [lds]
  names: ["`+lds+`open/*"]
- types: [sds]
`)))
	lis := func(n string) *resource.Variant {
		return variant(resource.ListenerURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.listener.v3.Listener", "name": %q}`, n))
	}
	h.put(lis(lds+"secret/a"), lis(lds+"secret/b"), lis(lds+"open/c"))

	// Delta: each glob alone on a stream of its own; the answers differ
	// only by the glob's name.
	answer := func(glob string) string {
		d := h.delta(node("d", nil))
		d.Sub(resource.ListenerURL, glob)
		r := d.Recv()
		d.Ack(r)
		d.Barrier(h.putSecret)
		return strings.ReplaceAll(describe(r), glob, "GLOB")
	}
	got, want := answer(secret), answer(empty)
	if got != want {
		t.Fatalf("denied glob answered %q, an empty one %q", got, want)
	}
	if want != "listener.v3.Listener: -GLOB" {
		t.Fatalf("empty glob answered %q", want)
	}

	// SotW: a full state without the denied members, as for an empty
	// glob.
	sotwAnswer := func(glob string) []string {
		s := h.sotw(node("s", nil))
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ListenerURL, ResourceNames: []string{glob}})
		r := s.Recv()
		s.Ack(r, glob)
		return sotwNames(t, r)
	}
	if got, want := sotwAnswer(secret), sotwAnswer(empty); len(got) != 0 || len(want) != 0 {
		t.Fatalf("SotW: denied glob %v, empty glob %v", got, want)
	}

	// A denied member added later tells a subscriber nothing.
	d := h.delta(node("later", nil))
	d.Sub(resource.ListenerURL, secret)
	d.Ack(d.Recv())
	h.put(lis(lds + "secret/new"))
	d.Barrier(h.putSecret)
}

// Issue 27 point 4, the attack: one delta request of 99,000 names the
// policy denies cost about 1.7 KB of server memory a name, held for the
// stream's life. Each is now answered as removed and not kept: the
// stream holds no subscription and nothing of them, and the heap is back
// near where it was.
func TestGuardDeniedNamesAreNotKept(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates")
	}
	h := newHarness(t, withGuard(mustPolicy(t, publicPolicy)))
	h.put(cluster("public-a"))
	const n = 99000
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("private-%06d", i)
	}
	d := h.delta(node("attacker", nil))
	d.Sub(resource.ClusterURL, "public-a") // the type's state exists before the baseline
	d.Ack(d.Recv())
	base := heapInUse()
	d.Sub(resource.ClusterURL, names...)
	r := d.Recv()
	if len(r.Resources) != 0 || len(r.RemovedResources) != n {
		t.Fatalf("want %d names removed and nothing sent, got %d resources, %d removed", n, len(r.Resources), len(r.RemovedResources))
	}
	d.Ack(r)
	d.Barrier(h.putSecret)
	r = nil
	after := heapInUse()
	kept := int64(after) - int64(base)
	t.Logf("heap: %d KiB before the request, %d KiB after: %d bytes a denied name", base>>10, after>>10, kept/n)
	for _, c := range h.srv.Streams() {
		for _, ts := range c.Types {
			if ts.URL == resource.ClusterURL && (len(ts.Subscriptions) != 1 || len(ts.Held) != 1) {
				t.Fatalf("the stream keeps %d subscriptions and %d held names of clusters, want only public-a's", len(ts.Subscriptions), len(ts.Held))
			}
		}
	}
	if kept > 100*n {
		t.Fatalf("%d denied names kept %d KiB (%d bytes each), want under 100 bytes each", n, kept>>10, kept/n)
	}
}
