//go:build unix

package files

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil"
)

// A FIFO named *.yaml in a directory is an error naming it, not a reader
// blocked forever waiting for a writer, nor a file silently skipped.
func TestLoadDirWithFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(`"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster`+"\nname: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "b.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// A symbolic link to a regular file is read as the file.
	if err := os.Symlink("a.yaml", filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(testutil.Wait):
		// Unblock the reader, so the test ends either way.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("Load of a directory holding a FIFO blocked")
	}
	want := fifo + ": not a regular file (a FIFO): only regular files in a directory are read\n" +
		filepath.Join(dir, "c.yaml") + `:1:1: document 1: envoy.config.cluster.v3.Cluster a is defined twice; first in ` + filepath.Join(dir, "a.yaml") + ":1 (document 1)"
	if err == nil || err.Error() != want {
		t.Fatalf("Load: %v\nwant %s", err, want)
	}
	if _, err := Read(fifo); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Read: %v, want ErrNotRegular", err)
	}
}
