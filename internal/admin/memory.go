package admin

import (
	"io"
	"runtime/debug"
	"sync"
)

// While applies decode their batches, the collector runs when the heap
// has grown by half since its last cycle (GOGC=50) instead of doubling; by
// a quarter (GOGC=25) while one with client checks runs (their index of
// references is live too), and while one is being stored (the store's
// transaction holds its records and pages until it commits). A 150 MB
// batch is live at about its size while it is stored: with the default,
// the server took 3.2 times its size in RSS. GOGC=25 throughout cost
// 100,000 clusters without checks a tenth more time than 50. Keeping 50
// in the store's part too was 5 to 10 % faster again, but let a full
// re-apply of them grow the server by 1.9 to 2.05 times their size, and
// a mesh of 1 KB resources by up to 2.0 times (1.8 with 25 there); with
// checks at 50, that mesh grew it by 2.2 times (BENCHMARKS.md, "Large
// batches"; bench/results/large-apply-2026-11-27-gogc50-stored.txt). A
// soft memory limit that followed the bytes read held the heap lower
// still, but made the collector run without pause once an apply with
// client checks went past it: twice the time.
//
// A lower GOGC set for the process is kept; the setting before comes back
// when the last running apply ends, and the memory a large apply freed is
// returned to the system then rather than over the following minutes.
const (
	applyGCPercent = 50
	checkGCPercent = 25
	// applyMemoryRelease is the size of applies after which the memory
	// they freed is returned to the system at once.
	applyMemoryRelease = 64 << 20
)

// applyMemory is the process's: GOGC is the runtime's, one per process.
var applyMemory memoryBudget

type memoryBudget struct {
	mu     sync.Mutex
	active int
	low    int   // running applies that want checkGCPercent
	prev   int   // GOGC before the first running apply began
	read   int64 // bytes the running applies have read
}

// applyGC is one running apply's part in the budget.
type applyGC struct {
	m   *memoryBudget
	low bool
}

// begin counts an apply in, with client checks or not; call end when it
// has ended.
func (m *memoryBudget) begin(checks bool) *applyGC {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active == 0 {
		m.prev = debug.SetGCPercent(applyGCPercent)
		m.read = 0
	}
	m.active++
	if checks {
		m.low++
	}
	m.set()
	return &applyGC{m: m, low: checks}
}

// storing says the apply has read its batch and gives it to the store:
// GOGC is checkGCPercent from now on. The decoding, which makes the
// garbage, is over, and the store's transaction holds its records and
// pages until it commits (see above for what 50 until the end cost).
func (a *applyGC) storing() {
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	if !a.low {
		a.low = true
		a.m.low++
		a.m.set()
	}
}

// set sets GOGC for the running applies.
func (m *memoryBudget) set() {
	gc := applyGCPercent
	if m.low > 0 {
		gc = checkGCPercent
	}
	if m.prev >= 0 && m.prev < gc || m.prev < 0 {
		gc = m.prev // lower already, or off (GOMEMLIMIT alone governs): as set
	}
	debug.SetGCPercent(gc)
}

// grow counts n more bytes read by an apply.
func (m *memoryBudget) grow(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read += n
}

func (a *applyGC) end() {
	m := a.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.low {
		m.low--
	}
	if m.active--; m.active > 0 {
		m.set()
		return
	}
	debug.SetGCPercent(m.prev)
	if m.read >= applyMemoryRelease {
		go debug.FreeOSMemory()
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
