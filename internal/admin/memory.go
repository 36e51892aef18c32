package admin

import (
	"io"
	"runtime/debug"
	"sync"
)

// While applies run, the collector runs when the heap has grown by half
// since its last cycle (GOGC=50), or by a quarter (GOGC=25) while one with
// client checks runs, instead of doubling. A 150 MB batch is live at about
// its size while it is stored, and the checks' index of references is
// live too: with the default, the server took 3.2 times the batch's size
// in RSS. The cost is more collections during the apply: GOGC=50 against
// 25 takes a tenth off 100,000 clusters without checks (the server grows
// by 1.4 instead of 1.25 times the input), and with checks it let the
// server grow by 2.2 times a mesh of 1 KB resources, 1.8 times at 25
// (BENCHMARKS.md, "Large batches"). A soft memory limit that followed the
// bytes read held the heap lower still, but made the collector run
// without pause once an apply with client checks went past it: twice the
// time.
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
	mu       sync.Mutex
	active   int
	checking int   // running applies with client checks
	prev     int   // GOGC before the first running apply began
	read     int64 // bytes the running applies have read
}

// begin counts an apply in, with client checks or not; call end with the
// same when it has ended.
func (m *memoryBudget) begin(checks bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.active == 0 {
		m.prev = debug.SetGCPercent(applyGCPercent)
		m.read = 0
	}
	m.active++
	if checks {
		m.checking++
	}
	m.set()
}

// set sets GOGC for the running applies.
func (m *memoryBudget) set() {
	gc := applyGCPercent
	if m.checking > 0 {
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

func (m *memoryBudget) end(checks bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if checks {
		m.checking--
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
