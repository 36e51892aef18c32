package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
)

// testKeyring: a key is made once, by the first of racing callers, and
// every caller gets it; it makes no revision.
func testKeyring(t *testing.T, s store.Store) {
	kr, ok := s.(store.Keyring)
	if !ok {
		t.Fatalf("%T is not a store.Keyring", s)
	}
	ctx := context.Background()
	rev := s.Rev()
	got := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := kr.Key(ctx, "test", []byte(fmt.Sprintf("fresh-%d", i)))
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}()
	}
	wg.Wait()
	for i := range got {
		if len(got[i]) == 0 || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("racing callers got different keys: %q", got)
		}
	}
	again, err := kr.Key(ctx, "test", []byte("later"))
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("a later call: %q, %v; want %q", again, err, got[0])
	}
	other, err := kr.Key(ctx, "other", []byte("x"))
	if err != nil || string(other) != "x" {
		t.Fatalf("another name: %q, %v", other, err)
	}
	if s.Rev() != rev {
		t.Fatalf("making keys made a revision: %d -> %d", rev, s.Rev())
	}
	k, err := store.KeyFor(ctx, s, "random")
	if err != nil || len(k) != 32 {
		t.Fatalf("KeyFor: %x, %v", k, err)
	}
}
