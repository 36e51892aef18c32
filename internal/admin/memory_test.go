package admin

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/storetest"
	"github.com/xdsd/xdsd/resource"
)

// While applies run, GOGC is applyGCPercent, or checkGCPercent while one
// with client checks runs or one is being stored, unless it was lower or
// off before; the setting before is back when the last apply ends; what
// they read is counted.
func TestMemoryBudget(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	gogc := func() int {
		g := debug.SetGCPercent(-1)
		debug.SetGCPercent(g)
		return g
	}
	for _, c := range []struct{ prev, during, low int }{
		{100, applyGCPercent, checkGCPercent}, {400, applyGCPercent, checkGCPercent},
		{40, 40, checkGCPercent}, {10, 10, 10}, {-1, -1, -1},
	} {
		debug.SetGCPercent(c.prev)
		var m memoryBudget
		a := m.begin(false)
		if got := gogc(); got != c.during {
			t.Errorf("GOGC %d before: %d once an apply began, want %d", c.prev, got, c.during)
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
		if got := gogc(); got != c.during {
			t.Errorf("GOGC %d before: %d with an apply still running, want %d", c.prev, got, c.during)
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
