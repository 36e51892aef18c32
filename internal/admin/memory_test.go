package admin

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
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
		var m memoryBudget
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
		a := m.begin(false)
		if got, want := during(); got != want {
			t.Errorf("GOGC %d before: %d once an apply began, want %d", c.prev, got, want)
		}
		if _, err := io.Copy(io.Discard, &budgetReader{r: bytes.NewReader(make([]byte, 100000)), m: &m}); err != nil {
			t.Fatal(err)
		}
		b := m.begin(true) // a second apply, with client checks, which ends first
		if got := gogc(); got != c.low {
			t.Errorf("GOGC %d before: %d with an apply with checks running, want %d", c.prev, got, c.low)
		}
		m.grow(5)
		b.storing()
		b.end()
		if got, want := during(); got != want {
			t.Errorf("GOGC %d before: %d with an apply still running, want %d", c.prev, got, want)
		}
		if m.read != 100005 {
			t.Errorf("read %d bytes, want 100005", m.read)
		}
		a.storing()
		a.storing() // (once is enough)
		if got := gogc(); got != c.low {
			t.Errorf("GOGC %d before: %d with an apply being stored, want %d", c.prev, got, c.low)
		}
		a.end()
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
	m := memoryBudget{onGC: func() {
		select {
		case collected <- struct{}{}:
		default:
		}
	}}
	runtime.GC()
	a := m.begin(false)
	defer a.end()
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
	case <-time.After(10 * time.Second):
		t.Fatal("no call after the collection")
	}
	if got := debug.SetGCPercent(100); got != checkGCPercent {
		t.Errorf("GOGC %d after a collection found 64 MiB more live, want %d", got, checkGCPercent)
	}
	runtime.KeepAlive(held)
}

// writeApplyResult writes, a key at a time, what writeJSON writes of an
// ApplyResult, with every key or the first N of each list.
func TestWriteApplyResult(t *testing.T) {
	for _, c := range []struct {
		r  store.Result
		fs []DocError
	}{
		{store.Result{Rev: 7}, nil},
		{store.Result{Rev: 8, Puts: []resource.Key{
			{Type: resource.ClusterURL, Name: `a "quoted" <name>`},
			{Type: resource.RouteURL, Name: "r", Constraints: "env=prod && v=1"},
		}, Deletes: []resource.Key{{Type: resource.ClusterURL, Name: "gone"}}},
			[]DocError{{Source: "f.yaml", Line: 3, Message: "route r: cluster c-v2: no such cluster", Warning: true}}},
	} {
		for _, list := range []int{-1, 0, 1, 5} {
			got := httptest.NewRecorder()
			writeApplyResult(got, c.r, c.fs, list)
			want := httptest.NewRecorder()
			out := result(c.r)
			out.Findings = c.fs
			if list >= 0 {
				// ?list=N names at most N of each list, and counts them all.
				out.Changed, out.Deleted = out.Changed[:min(list, len(out.Changed))], out.Deleted[:min(list, len(out.Deleted))]
			}
			writeJSON(want, http.StatusOK, out)
			if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != "application/json" {
				t.Errorf("list %d: got\n%s\nwant\n%s", list, got.Body, want.Body)
			}
		}
	}
}

// writeResourceList writes, a resource at a time, what writeJSON writes
// of a ResourceList, empty or not, whatever the names hold.
func TestWriteResourceList(t *testing.T) {
	for _, vs := range [][]*resource.Variant{
		nil,
		{storetest.Cluster(`a "quoted" <name>`, "", "x")},
		{storetest.Route("r", "env=prod && v=1", "p"), storetest.Route("r", "", "d"), storetest.Cluster("c", "", "y")},
	} {
		got := httptest.NewRecorder()
		writeResourceList(got, 9, sortVariants(vs))
		want := httptest.NewRecorder()
		out := ResourceList{Revision: 9, Resources: []Resource{}}
		for _, v := range sortVariants(vs) {
			out.Resources = append(out.Resources, Render(v))
		}
		writeJSON(want, http.StatusOK, out)
		if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != "application/json" {
			t.Errorf("got\n%s\nwant\n%s", got.Body, want.Body)
		}
	}
}
