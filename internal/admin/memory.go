package admin

import (
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// While applies decode their batches without client checks, the
// collector's goal (the live heap, grown by GOGC percent) is held to what
// the server held before them plus readHeadroom times the bytes they have
// read (readFloor at least): GOGC follows the batch, between
// checkGCPercent and maxReadGCPercent, set again after each collection.
// A batch whose variants are small beside its JSON (Istio-like clusters:
// 0.8 of it) gets GOGC near 100; one whose variants weigh more (a mesh of
// 1 KB resources) gets 50 or less. A fixed 50 spent 15 % of an apply of
// 100,000 clusters collecting, and 100 would let that mesh grow the
// server past twice its size.
//
// GOGC is checkGCPercent (25) while one with client checks runs (their
// index of references is live too), and while one is being stored (the
// store's transaction holds its records and pages until it commits). A
// 150 MB batch is live at about its size while it is stored: with the
// default, the server took 3.2 times its size in RSS. Keeping 50 in the
// store's part too was 5 to 10 % faster, but let a full re-apply of them
// grow the server by 1.9 to 2.05 times their size, and a mesh of 1 KB
// resources by up to 2.0 times (1.8 with 25 there); with checks at 50,
// that mesh grew it by 2.2 times (BENCHMARKS.md, "Large batches";
// bench/results/large-apply-2026-11-27-gogc50-stored.txt). A soft memory
// limit that followed the bytes read held the heap lower still, but made
// the collector run without pause once an apply with client checks went
// past it: twice the time.
//
// A lower GOGC set for the process is kept; the setting before comes back
// when the last running apply ends, and the memory a large apply freed is
// returned to the system then rather than over the following minutes.
const (
	maxReadGCPercent = 100
	checkGCPercent   = 25
	// readHeadroom and readFloor bound the goal while applies decode.
	readHeadroom = 1.6
	readFloor    = 16 << 20
	// applyMemoryRelease is the size of applies after which the memory
	// they freed is returned to the system at once.
	applyMemoryRelease = 64 << 20
)

// readGCPercent is GOGC for applies decoding without client checks that
// have read read bytes, with live bytes of heap live, when base were live
// before they began.
func readGCPercent(read, live, base uint64) int {
	budget := float64(base) + max(readHeadroom*float64(read), readFloor)
	g := 100 * (budget/float64(max(live, 1)) - 1)
	return int(min(max(g, checkGCPercent), maxReadGCPercent))
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// applyMemory is the process's: GOGC is the runtime's, one per process.
var applyMemory memoryBudget

type memoryBudget struct {
	mu     sync.Mutex
	active int
	low    int    // running applies that want checkGCPercent
	prev   int    // GOGC before the first running apply began
	read   int64  // bytes the running applies have read
	base   uint64 // the live heap when the first began
	live   uint64 // the live heap after the last collection
	armed  bool   // afterGC runs after the next collection
	onGC   func() // (tests) called by afterGC while applies run
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
		m.prev = debug.SetGCPercent(maxReadGCPercent)
		m.read = 0
		m.base = liveHeap()
		m.live = m.base
		if !m.armed {
			m.armed = true
			m.arm()
		}
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

// arm has afterGC run after the next collection.
func (m *memoryBudget) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(m *memoryBudget) { m.afterGC() }, m)
}

// gcSentinel is an object only a collection frees (it holds a pointer:
// the allocator would pack a smaller one with others, which could keep it).
type gcSentinel struct {
	_ *byte
	_ [40]byte
}

// afterGC sets GOGC again for what the last collection found live, while
// applies run.
func (m *memoryBudget) afterGC() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active == 0 {
		m.armed = false
		return
	}
	m.live = liveHeap()
	m.set()
	m.arm()
	if m.onGC != nil {
		m.onGC()
	}
}

// set sets GOGC for the running applies.
func (m *memoryBudget) set() {
	gc := readGCPercent(uint64(m.read), m.live, m.base)
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
