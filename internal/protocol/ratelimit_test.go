package protocol_test

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// A stream over its request rate is slowed down, never dropped: with a
// burst of one, each of six requests sent at once, all but the first
// waiting for the limiter, is applied, and the stream ends up with every
// name the last one asked for.
func TestRequestRateSlowsNotDrops(t *testing.T) {
	h := newHarness(t, func(o *protocol.Options) { o.RequestRate, o.RequestBurst = 200, 1 })
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		h.put(cluster(n))
	}
	c := h.sotw(node("n", nil))
	for i := range names {
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: names[:i+1]})
	}
	for r := c.Recv(); ; r = c.Recv() {
		got := protocoltest.SotWNames(t, r)
		if len(got) == len(names) {
			slices.Sort(got)
			if !slices.Equal(got, names) {
				t.Fatalf("answered %v, want %v", got, names)
			}
			return
		}
		if len(got) > len(names) {
			t.Fatalf("answered %v, want %v", got, names)
		}
	}
}
