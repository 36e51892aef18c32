package tuning

import (
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The bounds of GOGC while applies run (see the package doc).
const (
	maxReadGCPercent = 100
	checkGCPercent   = 25
	// readHeadroom and readFloor bound the goal while applies decode.
	readHeadroom = 1.6
	readFloor    = 16 << 20
	// applyMemoryRelease is the size of applies after which the memory
	// they freed is returned to the system at once.
	applyMemoryRelease = 64 << 20
	// smallApply is the size of an apply's body, known before it is read,
	// below which GOGC is left alone (BeginBody).
	smallApply = 1 << 20
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

// process is the process's Memory: GOGC is the runtime's, one per
// process, so every user of it must count its applies in the same one.
var process Memory

// Process is the process's Memory, for the program to hand to what runs
// its applies (admin.Options.Memory, server.Options.TuneGC).
func Process() *Memory { return &process }

// Memory steers GOGC while applies run (see the package doc). A nil
// *Memory steers nothing: its methods leave the runtime alone. The zero
// value is ready to use, but a program uses Process(), its only one;
// tests make their own.
type Memory struct {
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

// Apply is one running apply's part in a Memory.
type Apply struct {
	m   *Memory
	low bool
}

// Begin counts an apply in; call End when it has ended (when its
// revision is served: until then the server holds the batch twice). low
// says it keeps more than its garbage live from the start, so GOGC is
// checkGCPercent at once: client checks run (their index of references),
// or its batch was built before (server.Apply: nothing is left to decode).
func (m *Memory) Begin(low bool) *Apply {
	if m == nil {
		return nil
	}
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
	if low {
		m.low++
	}
	m.set()
	return &Apply{m: m, low: low}
}

// BeginBody is Begin for an apply whose body is size bytes, or -1 when
// that is not known before it is read (a body streamed in parts). One
// known to be under smallApply steers nothing: it returns a nil *Apply.
// Such an apply cannot grow the heap enough to matter, and lowering GOGC
// for it set off a collection of the whole heap — of a server's streams,
// not of the batch — whose assists slowed the fan-out that followed.
func (m *Memory) BeginBody(size int64, low bool) *Apply {
	if size >= 0 && size < smallApply {
		return nil
	}
	return m.Begin(low)
}

// Storing says the apply has read its batch and gives it to the store:
// GOGC is checkGCPercent from now on. The decoding, which makes the
// garbage, is over, and the store's transaction holds its records and
// pages until it commits.
func (a *Apply) Storing() {
	if a == nil {
		return
	}
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	if !a.low {
		a.low = true
		a.m.low++
		a.m.set()
	}
}

// End counts the apply out. When it was the last, GOGC is what it was
// before the first, and the memory the applies freed is returned to the
// system when they read applyMemoryRelease bytes or more.
func (a *Apply) End() {
	if a == nil {
		return
	}
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

// Reader counts what is read from r as read by the running applies.
func (m *Memory) Reader(r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return &countingReader{r: r, m: m}
}

// arm has afterGC run after the next collection.
func (m *Memory) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(m *Memory) { m.afterGC() }, m)
}

// gcSentinel is an object only a collection frees (it holds a pointer:
// the allocator would pack a smaller one with others, which could keep it).
type gcSentinel struct {
	_ *byte
	_ [40]byte
}

// afterGC sets GOGC again for what the last collection found live, while
// applies run.
func (m *Memory) afterGC() {
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
func (m *Memory) set() {
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
func (m *Memory) grow(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read += n
}

// countingReader counts what is read from r into m.
type countingReader struct {
	r io.Reader
	m *Memory
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.m.grow(int64(n))
	return n, err
}
