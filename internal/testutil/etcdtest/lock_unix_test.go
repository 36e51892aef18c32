//go:build unix

package etcdtest

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// A second builder waits for the first's lock: it takes it only once the
// first lets go (the lock is on the open file, so this holds within one
// process as across test binaries).
func TestLockFileExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		unlock2, err := lockFile(path)
		if err == nil {
			select {
			case <-released:
			default:
				err = errTookHeldLock
			}
			unlock2()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second lockFile returned while the first held the lock: %v", err)
	case <-time.After(200 * time.Millisecond): // waiting for nothing to happen: the second must still be blocked
	}
	close(released)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the second lockFile did not get the lock after the first let go")
	}
}

var errTookHeldLock = errors.New("took the lock while it was held")
