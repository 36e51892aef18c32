package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §1.1: a nonce is valid only on its own stream. A client that
// reconnects and carries the last nonce of its previous stream on its first
// request (Envoy before 1.28, grpc-js-xds: envoy#30155, grpc-node#2875)
// must still be answered: no response has been sent for the type on this
// stream, so its request cannot be stale. Otherwise it would wait forever.
func TestSotW_1_1_NonceFromAnotherStreamIsNotStale(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("a"))
	c := h.sotw(node("n", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}})
	r := c.Recv()
	c.Ack(r, "a")

	// A new stream: the first request carries the old stream's nonce.
	d := h.sotw(node("n", nil))
	d.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, VersionInfo: r.VersionInfo,
		ResponseNonce: r.Nonce + "-old", ResourceNames: []string{"a"}})
	expectNames(t, d.Recv(), resource.ClusterURL, "a")

	// Still nothing sent for a type (a name that does not exist), a later
	// request with the old nonce is not stale either (and goes by the fast
	// ACK path: no node, no locators).
	h.put(route("r", "", "a"))
	d.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResponseNonce: "old", ResourceNames: []string{"nope"}})
	d.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResponseNonce: "old", ResourceNames: []string{"nope", "r"}})
	expectNames(t, d.Recv(), resource.RouteURL, "r")
}

// docs/protocol.md §5.1: on-demand VHDS is a delta matter. A SotW ADS client
// asking for virtual hosts by "<rc>/<host>" names one that does not exist
// must not bring the server down (a not-found answer has no payload, which
// SotW cannot carry); it is served plain names, like any other type.
func TestSotW_5_1_VirtualHostsByPlainName(t *testing.T) {
	h := newHarness(t)
	h.put(vhost("rc/web", "www.example.com"))
	c := h.sotw(node("n", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNames: []string{"rc/nowhere.org", "rc/web", "rc/www.example.com"}})
	expectNames(t, c.Recv(), resource.VirtualHostURL, "rc/web")
	c.Barrier(h.putSecret)
	h.put(vhost("rc/nowhere.org", "nowhere.org"))
	expectNames(t, c.Recv(), resource.VirtualHostURL, "rc/nowhere.org")
}

// docs/architecture.md §6: misbehaving peers are bounded. Every type URL a stream
// names costs state, whether or not it subscribes anything, so the distinct
// types of one stream count against MaxSubscriptions; and types xdsd does
// not know share one metrics label, so a client cannot mint series.
func TestMisbehavingPeerBoundedInTypes(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(o *protocol.Options) { o.MaxSubscriptions = 3; o.Registerer = reg })
	d := h.delta(nil)
	d.Sub("type.googleapis.com/made.up.Type") // an implicit wildcard: answered, empty
	d.Recv()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && strings.Contains(l.GetValue(), "made.up") {
					t.Errorf("%s has a series for a type a client made up: %s", mf.GetName(), l.GetValue())
				}
			}
		}
	}

	c := h.sotw(nil)
	for i := range 4 { // no names: nothing subscribed, but a type state each
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: fmt.Sprintf("type.googleapis.com/made.up.T%d", i)})
	}
	select {
	case err := <-c.Errs:
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("err = %v", err)
		}
	case r := <-c.Resps:
		t.Fatalf("answered: %v", r)
	case <-time.After(wait):
		t.Fatal("a stream naming more types than it may subscribe was not ended")
	}
}
