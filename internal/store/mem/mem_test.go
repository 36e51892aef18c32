package mem_test

import (
	"context"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return mem.New() })
}

// A watcher further behind than the retained history gets the whole state.
func TestCompactedHistoryResets(t *testing.T) {
	s := mem.NewWithHistory(2)
	ctx := context.Background()
	for _, tag := range []string{"1", "2", "3", "4"} {
		if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", tag)}}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := s.Changes(ctx, 1)
	if err != nil || !cs.Reset || len(cs.Puts) != 1 || cs.Rev != 4 {
		t.Fatalf("changes from a compacted revision: %+v %v", cs, err)
	}
	cs, err = s.Changes(ctx, 3)
	if err != nil || cs.Reset || len(cs.Puts) != 1 {
		t.Fatalf("changes within history: %+v %v", cs, err)
	}
}

func TestHistoryCompaction(t *testing.T) { storetest.Compaction(t, mem.NewWithHistory(3), 3) }
