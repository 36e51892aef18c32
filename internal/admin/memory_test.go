package admin

import (
	"bytes"
	"io"
	"math"
	"runtime/debug"
	"testing"
)

// While applies run, the memory limit follows what they read, from what
// the process held when the first began; it is never raised above a limit
// set before (GOMEMLIMIT), and that limit is back when the last ends.
func TestMemoryBudget(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	for _, prev := range []int64{math.MaxInt64, 8 << 30, 1 << 20} {
		debug.SetMemoryLimit(prev)
		var m memoryBudget
		m.begin()
		base := m.base
		limit := func(read int64) int64 {
			return min(prev, int64(float64(base)+applyMemoryFactor*float64(read)+applyMemorySlack))
		}
		if got := debug.SetMemoryLimit(-1); got != limit(0) {
			t.Errorf("prev %d: limit %d once an apply began, want %d", prev, got, limit(0))
		}
		r := &budgetReader{r: bytes.NewReader(make([]byte, 5*applyMemoryStep+10)), m: &m}
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Fatal(err)
		}
		// A second apply shares the budget.
		m.begin()
		m.grow(3 * applyMemoryStep)
		if got, want := debug.SetMemoryLimit(-1), limit(8*applyMemoryStep); got != want {
			t.Errorf("prev %d: limit %d after two applies read 8 MiB, want %d", prev, got, want)
		}
		m.end()
		if got := debug.SetMemoryLimit(-1); got != limit(8*applyMemoryStep) {
			t.Errorf("prev %d: limit %d with one apply still running, want %d", prev, got, limit(8*applyMemoryStep))
		}
		m.end()
		if got := debug.SetMemoryLimit(-1); got != prev {
			t.Errorf("limit %d after the applies ended, want %d back", got, prev)
		}
	}
}
