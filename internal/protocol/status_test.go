package protocol_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

// typeStatus returns the only client's status for typeURL's type.
func (h *harness) typeStatus(typeURL string) protocol.TypeStatus {
	h.t.Helper()
	cs := h.srv.Streams()
	if len(cs) != 1 {
		h.t.Fatalf("%d clients, want 1", len(cs))
	}
	for _, ts := range cs[0].Types {
		if ts.Type == resource.ForURL(typeURL).Name {
			return ts
		}
	}
	h.t.Fatalf("no status for %s: %+v", typeURL, cs[0].Types)
	return protocol.TypeStatus{}
}

// docs/protocol.md §1.3: a SotW NACK's version_info is the last version
// the client accepted, so the status names the rejected version — the one
// sent with the NACKed nonce — and the last good one apart.
func TestStatus_NackNamesTheRejectedVersion(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c1"))
	c := h.sotw(node("nacker", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	good := c.Recv()
	c.Ack(good, "r")
	h.put(route("r", "", "c2"))
	bad := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: bad.Nonce,
		VersionInfo: good.VersionInfo, ErrorDetail: &status.Status{Code: 13, Message: "no such cluster c2"}})
	c.Barrier(h.putSecret)
	n := h.typeStatus(resource.RouteURL).LastNack
	if n == nil || n.Version != bad.VersionInfo || n.LastGood != good.VersionInfo || n.Nonce != bad.Nonce {
		t.Fatalf("NACK recorded as %+v; want version %q (rejected), last good %q", n, bad.VersionInfo, good.VersionInfo)
	}
}

// docs/protocol.md §2.1: over delta the rejected version is the response's
// system version, and the last good one the last ACKed.
func TestStatus_DeltaNackNamesTheRejectedVersion(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c1"))
	c := h.delta(node("nacker", nil))
	c.Sub(resource.RouteURL, "r")
	good := c.Recv()
	c.Ack(good)
	h.put(route("r", "", "c2"))
	bad := c.Recv()
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResponseNonce: bad.Nonce,
		ErrorDetail: &status.Status{Code: 13, Message: "no"}})
	c.Barrier(h.putSecret)
	n := h.typeStatus(resource.RouteURL).LastNack
	if n == nil || n.Version != bad.SystemVersionInfo || n.LastGood != good.SystemVersionInfo {
		t.Fatalf("NACK recorded as %+v; want version %q, last good %q", n, bad.SystemVersionInfo, good.SystemVersionInfo)
	}
}

// docs/protocol.md §1.2: an ACK carries the version it accepts. A request
// with the current nonce but a version this stream never sent accepts
// nothing, and is not recorded as an ACK.
func TestStatus_AckOfAVersionNeverSentIsNotRecorded(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c1"))
	c := h.sotw(node("liar", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce, VersionInfo: "999999"})
	c.Barrier(h.putSecret)
	if ts := h.typeStatus(resource.RouteURL); ts.AckedVersion != "" {
		t.Fatalf("acked version %q recorded from an ACK of a version never sent (sent %q)", ts.AckedVersion, r.VersionInfo)
	}
	c.Ack(r, "r")
	c.Barrier(h.putSecret)
	if ts := h.typeStatus(resource.RouteURL); ts.AckedVersion != r.VersionInfo {
		t.Fatalf("acked version %q, want %q", ts.AckedVersion, r.VersionInfo)
	}
}

// A client's NACK text is bounded in what the server keeps and shows, so
// one client cannot flood the status, the page or the logs.
func TestStatus_LongNackTextIsTruncated(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "", "c1"))
	c := h.sotw(node("flooder", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 13, Message: strings.Repeat("x", 1<<20)}})
	c.Barrier(h.putSecret)
	n := h.typeStatus(resource.RouteURL).LastNack
	if n == nil || len(n.Error) > 2048 || !strings.Contains(n.Error, "more bytes") {
		t.Fatalf("NACK text kept as %d bytes", len(n.Error))
	}
}

// The status says which variant each client holds (TP2's question "who got
// what"): the constraints and version of the variant its parameters chose.
func TestStatus_HeldVariants(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "prod"), route("r", "env=test", "test"))
	c := h.sotw(node("p", map[string]string{"env": "prod"}))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	c.Ack(r, "r")
	c.Barrier(h.putSecret)
	held := h.typeStatus(resource.RouteURL).Held
	if len(held) != 1 || held[0].Name != "r" || held[0].Constraints != "env=prod" || held[0].Version == "" || held[0].Variant == nil {
		t.Fatalf("held %+v; want r [env=prod] with its version", held)
	}
}

// countingWriter counts what the server logs.
type countingWriter struct {
	mu    sync.Mutex
	bytes int
	lines int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bytes += len(p)
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// A stream sending NACK after NACK with huge details cannot flood the log:
// NACK lines are rate-limited per stream (with a count of those held
// back) and the client's text is truncated.
func TestNackLogCannotFlood(t *testing.T) {
	var w countingWriter
	h := newHarness(t, func(o *protocol.Options) { o.Logger = slog.New(slog.NewTextHandler(&w, nil)) })
	h.put(route("r", "", "c1"))
	c := h.sotw(node("flooder", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	r := c.Recv()
	detail := strings.Repeat("y", 100<<10)
	const nacks = 50
	for range nacks {
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
			ErrorDetail: &status.Status{Code: 13, Message: detail}})
	}
	c.Barrier(h.putSecret)
	if n := h.typeStatus(resource.RouteURL).Nacks; n != nacks {
		t.Fatalf("%d NACKs recorded, want %d", n, nacks)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// One line for the connection, one or a few for the NACKs (a slow
	// machine may cross a second).
	if w.bytes > 20<<10 || w.lines > 10 {
		t.Fatalf("%d NACKs of 100 KiB logged %d lines, %d bytes", nacks, w.lines, w.bytes)
	}
}
