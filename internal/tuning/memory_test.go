package tuning

import (
	"bytes"
	"io"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil"
)

// While applies run, GOGC follows what they read (readGCPercent), or is
// checkGCPercent while one with client checks runs or one is being
// stored, unless it was lower or off before; the setting before is back
// when the last apply ends; what they read is counted.
func TestMemoryBudget(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	gogc := func() int {
		g := debug.SetGCPercent(-1)
		debug.SetGCPercent(g)
		return g
	}
	for _, c := range []struct{ prev, low int }{
		{100, checkGCPercent}, {400, checkGCPercent}, {40, checkGCPercent}, {10, 10}, {-1, -1},
	} {
		debug.SetGCPercent(c.prev)
		var m Memory
		// during is GOGC while the applies read: readGCPercent's for what
		// they read and the heap (a collection may come at any time, and
		// change it), unless lower before.
		// (It returns GOGC too, both read under the lock that a
		// collection's call takes to set it.)
		during := func() (got, want int) {
			m.mu.Lock()
			defer m.mu.Unlock()
			want = readGCPercent(uint64(m.read), m.live, m.base)
			if c.prev < want {
				want = c.prev
			}
			return gogc(), want
		}
		a := m.Begin(false)
		if got, want := during(); got != want {
			t.Errorf("GOGC %d before: %d once an apply began, want %d", c.prev, got, want)
		}
		if _, err := io.Copy(io.Discard, m.Reader(bytes.NewReader(make([]byte, 100000)))); err != nil {
			t.Fatal(err)
		}
		b := m.Begin(true) // a second apply, with client checks, which ends first
		if got := gogc(); got != c.low {
			t.Errorf("GOGC %d before: %d with an apply with checks running, want %d", c.prev, got, c.low)
		}
		m.grow(5)
		b.Storing()
		b.End()
		if got, want := during(); got != want {
			t.Errorf("GOGC %d before: %d with an apply still running, want %d", c.prev, got, want)
		}
		if m.read != 100005 {
			t.Errorf("read %d bytes, want 100005", m.read)
		}
		a.Storing()
		a.Storing() // (once is enough)
		if got := gogc(); got != c.low {
			t.Errorf("GOGC %d before: %d with an apply being stored, want %d", c.prev, got, c.low)
		}
		a.End()
		if got := gogc(); got != c.prev {
			t.Errorf("GOGC %d after the applies ended, want %d back", got, c.prev)
		}
		if m.low != 0 || m.active != 0 {
			t.Errorf("%d applies counted low, %d running, after they ended", m.low, m.active)
		}
	}
}

// GOGC while applies decode holds the collector's goal to what the
// server held before plus 1.6 times what they read: near 100 for a batch
// whose variants weigh 0.8 of its JSON, about 50 for one whose weigh as
// much as its JSON, 100 at most and 25 at least, and 100 while little is
// read (a floor of 16 MiB of headroom).
func TestReadGCPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		read, live, base uint64
		want             int
	}{
		{0, 8 * mb, 8 * mb, 100},         // the floor: 24 MiB over 8 live
		{150 * mb, 128 * mb, 8 * mb, 93}, // clusters: (8 + 240) / 128
		{100 * mb, 110 * mb, 8 * mb, 52}, // a mesh of 1 KB resources: (8 + 160) / 110
		{100 * mb, 200 * mb, 8 * mb, 25}, // heavier than the budget: the least
		{10 * mb, 1000 * mb, 990 * mb, 25},
		{10 * mb, 0, 0, 100},
	} {
		if got := readGCPercent(c.read, c.live, c.base); got != c.want {
			t.Errorf("read %d MiB, live %d MiB, base %d MiB: GOGC %d, want %d", c.read/mb, c.live/mb, c.base/mb, got, c.want)
		}
	}
}

// A collection while an apply runs sets GOGC again, for what it found
// live: 64 MiB more live than the 16 MiB of headroom an apply that has
// read nothing gets brings it down to checkGCPercent.
func TestGOGCFollowsCollections(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	collected := make(chan struct{}, 1)
	m := Memory{onGC: func() {
		select {
		case collected <- struct{}{}:
		default:
		}
	}}
	runtime.GC()
	a := m.Begin(false)
	defer a.End()
	m.mu.Lock()
	want := readGCPercent(0, m.base, m.base)
	m.mu.Unlock()
	if got := debug.SetGCPercent(-1); got != want {
		t.Errorf("GOGC %d as the apply began, want %d", got, want)
	}
	debug.SetGCPercent(want)
	held := make([]byte, 64<<20)
	runtime.GC()
	select {
	case <-collected:
	case <-time.After(testutil.Wait):
		t.Fatal("no call after the collection")
	}
	if got := debug.SetGCPercent(100); got != checkGCPercent {
		t.Errorf("GOGC %d after a collection found 64 MiB more live, want %d", got, checkGCPercent)
	}
	runtime.KeepAlive(held)
}

// A nil Memory steers nothing: a program that did not opt in keeps its
// GOGC, and what its applies read passes through unchanged.
func TestNilMemoryLeavesGOGC(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	var m *Memory
	a := m.Begin(true)
	a.Storing()
	r := bytes.NewReader([]byte("x"))
	if m.Reader(r) != io.Reader(r) {
		t.Error("a nil Memory's Reader wraps what it is given")
	}
	a.End()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("GOGC %d after an apply with a nil Memory, want 77 left alone", got)
	}
}

// An apply whose body is known to be small leaves GOGC alone; one of
// unknown size, or a large one, steers it as Begin does.
func TestSmallApplyLeavesGOGC(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	var m Memory
	small := m.BeginBody(600, true)
	small.Storing()
	if got := debug.SetGCPercent(77); got != 77 {
		t.Errorf("GOGC %d during a 600-byte apply, want 77 left alone", got)
	}
	small.End()
	for _, size := range []int64{-1, smallApply} {
		a := m.BeginBody(size, true)
		if got := debug.SetGCPercent(-1); got != checkGCPercent {
			t.Errorf("GOGC %d during an apply of %d bytes with checks, want %d", got, size, checkGCPercent)
		}
		debug.SetGCPercent(checkGCPercent)
		a.End()
		if got := debug.SetGCPercent(77); got != 77 {
			t.Errorf("GOGC %d after an apply of %d bytes, want 77 back", got, size)
		}
	}
}
