//go:build !race

package protocol_test

// Built without -race only (docs/testing.md, "Budgets"): under the race
// detector its 300,000 subscriptions took 100 s of a full run, and what it
// measures, the heap a stream leaves behind, needs no race detector.

import (
	"fmt"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

// Memory is bounded by what is connected: streams that subscribe to
// distinct name sets and leave take everything they cost with them — the
// shared computations and encodings kept for streams in step included.
// (Before, one client could grow the server by each stream it opened and
// closed until the next change of the store.)
func TestLeftStreamsMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates")
	}
	h := newHarness(t)
	h.put(cluster("present"))
	const streams, names = 30, 10000
	// Warm up once, so that what one-time allocations there are (gRPC's
	// buffers, the type registry) are in the baseline.
	warm := h.sotw(node("warm", nil))
	warm.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"present"}})
	warm.Recv()
	warm.Close()
	waitNoClients(t, h)
	base := heapInUse()

	for i := range streams {
		c := h.sotw(node(fmt.Sprint("churn-", i), nil))
		ns := make([]string, names)
		for j := range ns {
			ns[j] = fmt.Sprintf("c-%d-%d-with-a-name-long-enough-to-count", i, j)
		}
		ns[0] = "present"
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: ns})
		c.Recv()
		c.Close()
	}
	waitNoClients(t, h)
	after := heapInUse()
	const margin = 6 << 20
	if after > base+margin {
		t.Fatalf("heap %d MiB after %d streams of %d distinct names left, baseline %d MiB: %d MiB kept",
			after>>20, streams, names, base>>20, (after-base)>>20)
	}
	t.Logf("heap: baseline %d KiB, after churn %d KiB", base>>10, after>>10)
}

// waitNoClients waits until the server has no stream left.
func waitNoClients(t *testing.T, h *harness) {
	t.Helper()
	testutil.Eventually(t, "no stream left on the server", func() bool { return len(h.srv.Streams()) == 0 })
}
