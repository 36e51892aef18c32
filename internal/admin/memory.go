package admin

import (
	"io"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// While applies run, the Go runtime's soft memory limit bounds the
// server's memory by what they read. Left to itself, the collector lets
// the heap grow to twice what was live at its last cycle: a 150 MB batch,
// live at about 1.5 times its size while it is stored, took the server
// 3.2 times its size in RSS. With the limit the collector runs as the
// heap nears what the applies need instead.
//
// The limit is what the process held when the first running apply began,
// plus applyMemoryFactor times the bytes the running applies have read,
// plus applyMemorySlack; it is lowered by no more than the limit set
// before (GOMEMLIMIT), which comes back when the last apply ends. The
// limit is soft: were an apply to need more, the runtime collects more
// often (at most half the CPU) but never fails an allocation.
const (
	applyMemoryFactor = 1.8
	applyMemorySlack  = 24 << 20
	// applyMemoryStep is how many bytes a body is read between two
	// updates of the limit.
	applyMemoryStep = 1 << 20
	// applyMemoryRelease is the size of applies after which the memory
	// they freed is returned to the system at once.
	applyMemoryRelease = 64 << 20
)

// applyMemory is the process's budget: the memory limit is the runtime's,
// one per process.
var applyMemory memoryBudget

type memoryBudget struct {
	mu     sync.Mutex
	active int
	prev   int64 // the limit before the first running apply began
	base   int64 // what the process held then
	read   int64 // bytes the running applies have read
}

// begin counts an apply in; call end when it has ended.
func (m *memoryBudget) begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active == 0 {
		m.prev = debug.SetMemoryLimit(-1)
		m.base = heldMemory()
		m.read = 0
	}
	m.active++
	m.set()
}

// grow counts n more bytes read by an apply.
func (m *memoryBudget) grow(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read += n
	m.set()
}

func (m *memoryBudget) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active--; m.active == 0 {
		debug.SetMemoryLimit(m.prev)
		if m.read >= applyMemoryRelease {
			// What the batch no longer needs goes back to the system
			// now rather than over the next minutes.
			go debug.FreeOSMemory()
		}
	}
}

func (m *memoryBudget) set() {
	limit := float64(m.base) + applyMemoryFactor*float64(m.read) + applyMemorySlack
	if limit < float64(m.prev) {
		debug.SetMemoryLimit(int64(limit))
	}
}

// heldMemory is the memory the runtime counts against its limit.
func heldMemory() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	held := s[0].Value.Uint64() - s[1].Value.Uint64()
	return int64(min(held, math.MaxInt64))
}

// budgetReader counts what is read from r into the budget, a step at a
// time.
type budgetReader struct {
	r       io.Reader
	m       *memoryBudget
	pending int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.pending += int64(n); b.pending >= applyMemoryStep {
		b.m.grow(b.pending)
		b.pending = 0
	}
	return n, err
}
