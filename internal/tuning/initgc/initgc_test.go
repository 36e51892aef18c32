package initgc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// Restore raises the percentage by the heap initialisation left (here,
// 8 MB: twice the runtime's first goal), and Settle puts the start's
// back at once, for a command that runs long.
func TestRestoreThenSettle(t *testing.T) {
	if prev < 0 {
		t.Skip("GOGC=off")
	}
	defer debug.SetGCPercent(prev)
	settled.Store(false) // (a run before this one, -count=N, settled it)
	left := make([]byte, 8<<20)
	Restore()
	runtime.KeepAlive(left)
	if got := gogc(); got < prev+200 {
		t.Errorf("after Restore: GOGC %d, want at least the start's %d + 200 (8 MB left, the first goal 4 MB)", got, prev)
	}
	Settle()
	if got := gogc(); got != prev {
		t.Errorf("after Settle: GOGC %d, want the start's %d", got, prev)
	}
	if !settled.Load() {
		t.Error("Settle did not disarm Restore's cleanup")
	}
}
