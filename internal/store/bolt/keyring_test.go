package bolt_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
)

// The redaction key is made once and kept across a restart (issue 27
// point 8: digests stay stable).
func TestKeyKeptAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	ctx := context.Background()
	k1, err := store.KeyFor(ctx, s, store.RedactKeyName)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	k2, err := store.KeyFor(ctx, s, store.RedactKeyName)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("after reopen: %x %v, want %x", k2, err, k1)
	}
}
