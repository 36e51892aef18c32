//go:build unix

package origin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/testutil"
)

// A FIFO named *.yaml in a watched directory is reported, naming it, and
// nothing is applied; the scan does not block on it, and the same state is
// not reported again every round.
func TestDirWatcherFIFO(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", cl+"name: a\n")
	fifo := filepath.Join(dir, "b.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	st := mem.New()
	w := &origin.DirWatcher{Store: st, Dir: dir}
	type result struct {
		applied bool
		err     error
	}
	sync := func() result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			applied, err := w.Sync(context.Background())
			done <- result{applied, err}
		}()
		select {
		case r := <-done:
			return r
		case <-time.After(testutil.Wait):
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
			t.Fatal("Sync of a directory holding a FIFO blocked")
			return result{}
		}
	}
	r := sync()
	if r.applied || r.err == nil || !strings.Contains(r.err.Error(), fifo+": not a regular file (a FIFO)") {
		t.Fatalf("first sync: %v %v, want an error naming %s", r.applied, r.err, fifo)
	}
	if got := names(t, st); len(got) != 0 {
		t.Fatalf("applied %v alongside the FIFO", got)
	}
	if r := sync(); r.applied || r.err != nil {
		t.Fatalf("unchanged directory: %v %v, want nothing new", r.applied, r.err)
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	if r := sync(); !r.applied || r.err != nil {
		t.Fatalf("after removing the FIFO: %v %v", r.applied, r.err)
	}
	if got := names(t, st); len(got) != 1 {
		t.Fatalf("after removing the FIFO: %v", got)
	}
}
