package etcd_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// Replicas racing to make the redaction key agree on it, and a replica
// started later reads the same one (issue 27 point 8).
func TestReplicasAgreeOnKey(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	a, b := open(t, c, p), open(t, c, p)
	ctx := context.Background()
	keys := make([][]byte, 2)
	var wg sync.WaitGroup
	for i, s := range []store.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := store.KeyFor(ctx, s, store.RedactKeyName)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	later, err := store.KeyFor(ctx, open(t, c, p), store.RedactKeyName)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys[0]) != 32 || !bytes.Equal(keys[0], keys[1]) || !bytes.Equal(keys[0], later) {
		t.Fatalf("replicas' keys differ: %x %x %x", keys[0], keys[1], later)
	}
}
