//go:build !race

package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
)

// Built without -race only (docs/testing.md, "Budgets"): the race
// detector changes what memory costs. .ci/run runs it on its own.

// heapPeak records the live heap after every garbage collection: the most
// memory the process held, measured where the collector measures it, not
// sampled by a timer.
type heapPeak struct {
	mu      sync.Mutex
	stopped bool
	max     uint64
}

func watchHeap() *heapPeak {
	h := &heapPeak{}
	h.arm()
	return h
}

// arm sets a finalizer on a fresh object: it runs after the next
// collection, reads the live heap and arms the next.
func (h *heapPeak) arm() {
	sentinel := new([64]byte)
	runtime.SetFinalizer(sentinel, func(*[64]byte) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.max = max(h.max, s[0].Value.Uint64())
		if !h.stopped {
			h.arm()
		}
	})
}

func (h *heapPeak) stop() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	return h.max
}

// A batch of 100,000 resources (Istio-like clusters, about 140 MB of JSON)
// goes from a file to the store as one revision, in memory bounded by the
// input: the apply process streams the file, and the server keeps only
// each document's encoded variant while it reads, then the store commits
// them in one transaction. The bound holds for both processes together
// here (they share this test's process): the live heap never exceeds
// twice the input. TestApplyLargeBatch checks what the applies answer.
func TestApplyLargeBatchBudget(t *testing.T) {
	n := 100000
	if testing.Short() {
		// Not much smaller: the bound is on the batch's share of the
		// heap, and with a few MB of input what else the test process
		// allocates meanwhile moves the ratio by tenths.
		n = 20000
	}
	file := filepath.Join(t.TempDir(), "mesh.json")
	size := writeClusters(t, file, n)

	_, adm := startServe(t)
	runtime.GC()
	base := heapLive()
	h := watchHeap()
	// The clusters' endpoints are not in the batch: Envoy would wait for
	// them, which the client checks report; this measures the apply.
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file)
	runtime.GC()
	peak := h.stop() - min(base, h.max)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("revision 1: %d variants changed", n)) {
		t.Fatalf("apply: exit %d\n%.300s\n%s", code, out, errOut)
	}
	t.Logf("%d resources, %d bytes: peak live heap %d bytes over the %d before (%.2fx the input)", n, size, peak, base, float64(peak)/float64(size))
	if peak > 2*size {
		t.Errorf("the apply held %d bytes at its peak, more than twice its %d-byte input", peak, size)
	}

	// The same clusters, every one changed, over the first: the store
	// compares each with what it holds and keeps the replaced ones as
	// history, and the server serves the first state until the second is
	// committed. The batch's share peaks at 2.0-2.1x its input here: the
	// batch, and bbolt's pages for a commit that rewrites every record
	// and writes as many history records (about 17 MB for 20,000, which
	// bbolt pools after the commit). It was 6.9x when history copied
	// every payload; the bound keeps it near 2x.
	changeClusters(t, file, n)
	runtime.GC()
	base = heapLive()
	h = watchHeap()
	code, out, errOut = runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file)
	runtime.GC()
	peak = h.stop() - min(base, h.max)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("revision 2: %d variants changed", n)) {
		t.Fatalf("second apply: exit %d\n%.300s\n%s", code, out, errOut)
	}
	t.Logf("every resource changed: peak live heap %d bytes over the %d before (%.2fx the input)", peak, base, float64(peak)/float64(size))
	if peak > 5*size/2 {
		t.Errorf("the second apply held %d bytes at its peak, more than 2.5 times its %d-byte input", peak, size)
	}
}

func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
