package protocol_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

func expectNames(t *testing.T, r *discoveryv3.DiscoveryResponse, typeURL string, want ...string) {
	t.Helper()
	if r.TypeUrl != typeURL {
		t.Fatalf("response type %s, want %s", r.TypeUrl, typeURL)
	}
	got := sotwNames(t, r)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s response holds %q, want %q", resource.ForURL(typeURL).Name, got, want)
	}
	if r.Nonce == "" || r.VersionInfo == "" {
		t.Fatalf("response without nonce or version: %v", r)
	}
}

// docs/protocol.md §1.5: [] is a wildcard; ["*","A"] is wildcard + A; ["A"] is A
// only; then [] is nothing.
func TestSotW_1_5_WildcardSequence(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"), cluster("b"))
	c := h.sotw(node("n", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
	r := c.Recv()
	expectNames(t, r, resource.ClusterURL, "a", "b")

	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo, ResourceNames: []string{"*", "a"}})
	r = c.Recv() // a is newly named: sent again (§1.6)
	expectNames(t, r, resource.ClusterURL, "a", "b")

	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo, ResourceNames: []string{"a"}})
	r = c.Recv()
	expectNames(t, r, resource.ClusterURL, "a")

	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
	r = c.Recv() // the gRPC client's unsubscribe: an empty full state
	expectNames(t, r, resource.ClusterURL)
	c.Ack(r)
	h.put(cluster("c"))
	c.Barrier(h.putSecret) // nothing subscribed: the new cluster is not sent
}

// docs/protocol.md §1.1, §1.2: responses carry a nonce; an ACK (the response's
// version and nonce) is recorded per type and answered with nothing.
func TestSotW_1_2_AckRecordedAndUnanswered(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c"))
	c := h.sotw(node("acker", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	expectNames(t, r, resource.RouteURL, "r")
	c.Ack(r, "r")
	c.Barrier(h.putSecret)
	st := h.srv.Streams()[0]
	var ts *typeStatusView
	for i := range st.Types {
		if st.Types[i].Type == "envoy.config.route.v3.RouteConfiguration" {
			ts = &typeStatusView{st.Types[i].AckedVersion, st.Types[i].AckedNonce, st.Types[i].SentNonce}
		}
	}
	if st.NodeID != "acker" || ts == nil || ts.acked != r.VersionInfo || ts.ackedNonce != r.Nonce || ts.sentNonce != r.Nonce {
		t.Fatalf("client status %+v / %+v", st, ts)
	}
}

type typeStatusView struct{ acked, ackedNonce, sentNonce string }

// docs/protocol.md §1.3 and docs/architecture.md §6: a NACK is told by error_detail,
// recorded with its message, and the rejected version is not sent again;
// the next change is.
func TestSotW_1_3_NackRecordedNotResent(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c1"))
	c := h.sotw(node("nacker", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 13, Message: "route r: no such cluster c1"}})
	c.Barrier(h.putSecret)
	cl := h.srv.Streams()[0]
	found := false
	for _, ts := range cl.Types {
		if ts.LastNack != nil {
			found = ts.LastNack.Error == "route r: no such cluster c1" && ts.LastNack.Nonce == r.Nonce && ts.Nacks == 1
		}
	}
	if !found {
		t.Fatalf("NACK not recorded: %+v", cl.Types)
	}
	h.put(route("r", "", "c2"))
	r2 := c.Recv()
	expectNames(t, r2, resource.RouteURL, "r")
	if r2.Nonce == r.Nonce || r2.VersionInfo == r.VersionInfo {
		t.Errorf("the next change reused nonce/version: %v", r2)
	}
}

// docs/protocol.md §1.6: a name added to the list is sent, even if it was sent
// before and has not changed.
func TestSotW_1_6_AddedNameSentAgain(t *testing.T) {
	h := newHarness(t)
	h.put(route("a", "", "x"), route("b", "", "x"))
	c := h.sotw(nil)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"a"}})
	r := c.Recv()
	expectNames(t, r, resource.RouteURL, "a")
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"a", "b"}, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
	r = c.Recv()
	expectNames(t, r, resource.RouteURL, "b") // RDS is not full-state: only the new one
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"b"}, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
	c.Barrier(h.putSecret) // dropping a needs no response
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"a", "b"}, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo})
	r = c.Recv()
	expectNames(t, r, resource.RouteURL, "a") // unchanged, but newly added again
}

// docs/protocol.md §1.7: LDS and CDS responses hold every subscribed resource; a
// deleted one is left out; deleting everything sends an empty response.
func TestSotW_1_7_FullState(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"), cluster("b"))
	c := h.sotw(nil)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a", "b", "missing"}})
	r := c.Recv()
	expectNames(t, r, resource.ClusterURL, "a", "b")
	c.Ack(r, "a", "b", "missing")
	h.put(clusterTagged("a", "changed"))
	r = c.Recv()
	expectNames(t, r, resource.ClusterURL, "a", "b") // b unchanged, still present
	c.Ack(r, "a", "b", "missing")
	h.remove(resource.ClusterURL, "b")
	r = c.Recv()
	expectNames(t, r, resource.ClusterURL, "a")
	c.Ack(r, "a", "b", "missing")
	h.remove(resource.ClusterURL, "a")
	r = c.Recv()
	expectNames(t, r, resource.ClusterURL)
}

// docs/protocol.md §1.8: a request with a stale nonce is not answered; nothing
// is sent until data changes; a name that does not exist is remembered and
// pushed when it appears.
func TestSotW_1_8_StaleNonceAndAbsentNames(t *testing.T) {
	h := newHarness(t)
	h.put(route("a", "", "x"))
	c := h.sotw(nil)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"a", "later"}})
	r1 := c.Recv()
	expectNames(t, r1, resource.RouteURL, "a")
	h.put(route("a", "", "y"))
	r2 := c.Recv()
	// A request carrying the older nonce, even one changing names, is stale.
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"a", "later", "other"}, ResponseNonce: r1.Nonce, VersionInfo: r1.VersionInfo})
	c.Barrier(h.putSecret)
	c.Ack(r2, "a", "later")
	c.Barrier(h.putSecret)
	h.put(route("later", "", "x"))
	r := c.Recv()
	expectNames(t, r, resource.RouteURL, "later")
}

// docs/protocol.md §1.9: ADS make-before-break. One batch adds cluster B (with
// endpoints), moves the route from A to B and deletes A: the client sees
// CDS with A and B, EDS for B, RDS, and only then CDS without A.
func TestSotW_1_9_MakeBeforeBreak(t *testing.T) {
	h := newHarness(t)
	cla := func(n string) *resource.Variant {
		return variant(resource.EndpointURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.endpoint.v3.ClusterLoadAssignment", "cluster_name": %q}`, n))
	}
	h.put(cluster("A"), cla("A"), route("r", "", "A"))
	c := h.sotw(nil)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
	rc := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointURL, ResourceNames: []string{"A", "B"}})
	re := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	rr := c.Recv()
	c.Ack(rc)
	c.Ack(re, "A", "B")
	c.Ack(rr, "r")
	c.Barrier(h.putSecret)

	h.update(dbUpdate(
		[]*resource.Variant{cluster("B"), cla("B"), route("r", "", "B")},
		[][2]string{{resource.ClusterURL, "A"}, {resource.EndpointURL, "A"}}))
	var seq []string
	for range 4 {
		r := c.Recv()
		names := sotwNames(t, r)
		slices.Sort(names)
		seq = append(seq, fmt.Sprintf("%s%v", resource.ForURL(r.TypeUrl).Aliases[0], names))
	}
	want := []string{"cds[A B]", "eds[B]", "rds[r]", "cds[B]"}
	if !slices.Equal(seq, want) {
		t.Fatalf("order %v, want %v", seq, want)
	}
}

// docs/protocol.md §1.10 and docs/architecture.md §4.5: resources go out wrapped in a
// discovery Resource, with their constraints, only to a client that says it
// takes them; others get the plain resource.
func TestSotW_1_10_WrappedOnlyForCapableClients(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "p"), route("r", "env=test", "t"))
	plain := h.sotw(node("plain", map[string]string{"env": "prod"}))
	plain.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := plain.Recv()
	if r.Resources[0].TypeUrl != resource.RouteURL {
		t.Fatalf("plain client got %s", r.Resources[0].TypeUrl)
	}
	expectNames(t, r, resource.RouteURL, "r")
	wrapped := h.sotw(node("grpc", map[string]string{"env": "test"}, "xds.config.resource-in-sotw"))
	wrapped.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r = wrapped.Recv()
	if r.Resources[0].TypeUrl != resource.WrapperURL {
		t.Fatalf("capable client got %s", r.Resources[0].TypeUrl)
	}
	expectNames(t, r, resource.RouteURL, "r [env=test]")
}

// docs/protocol.md §1.7 in a cache (a relay): a SotW full state waits for the
// names its source has not answered — it would say they do not exist —
// but only PendingWait for names the client never had (a SotW source may
// never answer for them); they follow when they are known.
func TestSotW_1_7_FullStateInACache(t *testing.T) {
	d := db.NewCache(db.Hooks{})
	ps := protocol.NewCacheServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, cachepolicy.Policy{PendingWait: 300 * time.Millisecond})
	_, conn := protocoltest.Serve(t, ps.Register)
	d.Update(db.Update{Rev: 1, Puts: []*resource.Variant{cluster("c").WithVersion("1")},
		Known: []db.Key{{Type: resource.ClusterURL, Name: "c", ParamsKey: db.AnyParams}}})
	c := protocoltest.NewSotW(t, conn, nil)
	start := time.Now()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "x"}})
	r := c.Recv()
	if got := protocoltest.SotWNames(t, r); len(got) != 1 || got[0] != "c" {
		t.Fatalf("full state: %v", got)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("answered after %s, before PendingWait: x might have been known by then", waited)
	}
	c.Ack(r, "c", "x")
	d.Update(db.Update{Rev: 2, Puts: []*resource.Variant{cluster("x").WithVersion("2")},
		Known: []db.Key{{Type: resource.ClusterURL, Name: "x", ParamsKey: db.AnyParams}}})
	if got := protocoltest.SotWNames(t, c.Recv()); len(got) != 2 {
		t.Fatalf("once x is known: %v", got)
	}
}

// docs/protocol.md §1.4: a reconnecting client's first request carries the last
// version it saw; xdsd answers it with the current state (it may skip a
// resend only when the subscription has not grown, and does not rely on
// that), so a client that missed changes while away catches up.
func TestSotW_1_4_ReconnectWithVersion(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"))
	c := h.sotw(nil)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}})
	r := c.Recv()
	c.Ack(r, "a")
	h.put(clusterTagged("a", "changed while away"))
	d := h.sotw(nil)
	d.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, VersionInfo: r.VersionInfo, ResourceNames: []string{"a"}})
	r2 := d.Recv()
	if r2.VersionInfo == r.VersionInfo || !strings.Contains(r2.Resources[0].String(), "changed while away") {
		t.Fatalf("after reconnecting with version %s: %v", r.VersionInfo, r2)
	}
	// Unchanged, the state comes again too, under the same version.
	e := h.sotw(nil)
	e.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, VersionInfo: r2.VersionInfo, ResourceNames: []string{"a"}})
	if r3 := e.Recv(); r3.VersionInfo != r2.VersionInfo || len(r3.Resources) != 1 {
		t.Fatalf("reconnecting up to date: %v", r3)
	}
}
