package admin

import (
	"io"
	"runtime/debug"
	"sync"
)

// While applies run, the collector runs when the heap has grown by a
// quarter since its last cycle (GOGC=25) instead of doubling: a 150 MB
// batch, live at about 1.5 times its size while it was stored, took the
// server 3.2 times its size in RSS with the default. The cost is more
// collections during the apply: none measurable for 100,000 clusters
// without client checks, about a fifth more time with them, whose index
// of references is live too (BENCHMARKS.md, "Large batches"; GOGC=50
// gave back half of that for half the memory saved). A soft memory limit
// that followed the bytes read held the heap lower still, but made the
// collector run without pause once an apply with client checks went past
// it: twice the time.
//
// A lower GOGC set for the process is kept; the setting before comes back
// when the last running apply ends, and the memory a large apply freed is
// returned to the system then rather than over the following minutes.
const (
	applyGCPercent = 25
	// applyMemoryRelease is the size of applies after which the memory
	// they freed is returned to the system at once.
	applyMemoryRelease = 64 << 20
)

// applyMemory is the process's: GOGC is the runtime's, one per process.
var applyMemory memoryBudget

type memoryBudget struct {
	mu     sync.Mutex
	active int
	prev   int   // GOGC before the first running apply began
	read   int64 // bytes the running applies have read
}

// begin counts an apply in; call end when it has ended.
func (m *memoryBudget) begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active == 0 {
		m.prev = debug.SetGCPercent(applyGCPercent)
		if m.prev >= 0 && m.prev < applyGCPercent || m.prev < 0 {
			// Lower already, or off (GOMEMLIMIT alone governs): as set.
			debug.SetGCPercent(m.prev)
		}
		m.read = 0
	}
	m.active++
}

// grow counts n more bytes read by an apply.
func (m *memoryBudget) grow(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read += n
}

func (m *memoryBudget) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active--; m.active == 0 {
		debug.SetGCPercent(m.prev)
		if m.read >= applyMemoryRelease {
			go debug.FreeOSMemory()
		}
	}
}

// budgetReader counts what is read from r into the budget.
type budgetReader struct {
	r io.Reader
	m *memoryBudget
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.m.grow(int64(n))
	return n, err
}
