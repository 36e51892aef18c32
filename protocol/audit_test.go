package protocol_test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/resource"
)

// PROTOCOL.md §1.1: a nonce is valid only on its own stream. A client that
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

// PROTOCOL.md §5.1: on-demand VHDS is a delta matter. A SotW ADS client
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
