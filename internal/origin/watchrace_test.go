package origin_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// beforeApply is a replica's real store whose next Apply first runs
// meanwhile: what another replica commits between this one's check and
// its write.
type beforeApply struct {
	store.Store
	meanwhile atomic.Pointer[func()]
}

func (s *beforeApply) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	if f := s.meanwhile.Swap(nil); f != nil {
		(*f)()
	}
	return s.Store.Apply(ctx, b)
}

// Two replicas on one etcd: a --watch directory's write on A that
// checked "nothing staged" before a canary apply through B committed is
// refused, naming the staged revision, instead of landing on top of it
// (the check and the write are one: store.Batch.IfRev); once the staged
// revision is aborted, the next sync applies the directory.
func TestDirWatcherRacingStageAcrossReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	open := func() *etcd.Store {
		s, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/watchrace/", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stA, stB := &beforeApply{Store: open()}, open()
	ctx := t.Context()
	dir := t.TempDir()
	w := &origin.DirWatcher{Store: stA, Dir: dir}
	write(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: v1\n")
	if applied, err := w.Sync(ctx); !applied || err != nil {
		t.Fatalf("first sync: %v %v", applied, err)
	}

	// The directory changes; B stages a change of c just before A writes.
	write(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: v2\n")
	var staged int64
	f := func() {
		b := store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "", "staged")}, IfRev: stB.Rev(),
			Audit: store.Audit{Via: "apply --canary 25%", Stage: &store.Stage{State: store.StateStaged, Canary: "25%"}}}
		store.MarkStage(&b)
		res, err := stB.Apply(ctx, b)
		if err != nil {
			t.Errorf("the canary apply through B: %v", err)
			return
		}
		staged = res.Rev
		// A has seen it, so its check again finds it (else it would
		// only be refused, until its next round).
		testutil.Eventually(t, "A to follow B's stage", func() bool { return stA.Rev() >= staged })
	}
	stA.meanwhile.Store(&f)
	applied, err := w.Sync(ctx)
	var se *origin.StagedError
	if applied || !errors.As(err, &se) || se.Rev != staged {
		t.Fatalf("a watched write racing a stage through another replica: applied %v, %v; want refused naming revision %d", applied, err, staged)
	}
	if rec, ok, err := store.Staged(ctx, stB); err != nil || !ok || rec.Rev != staged {
		t.Fatalf("the staged revision %d is no longer the latest: %v %v %v", staged, rec.Rev, ok, err)
	}

	// Aborted: the next sync applies the directory.
	rec, _, err := store.Staged(ctx, stB)
	if err != nil {
		t.Fatal(err)
	}
	ab, err := store.AbortBatch(ctx, stB, rec, store.Audit{Via: "rollout abort", Stage: &store.Stage{State: store.StateAborted, Of: staged, Canary: "25%"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stB.Apply(ctx, ab); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "A to follow the abort", func() bool { return stA.Rev() >= staged+1 })
	if applied, err := w.Sync(ctx); !applied || err != nil {
		t.Fatalf("sync after the abort: %v %v", applied, err)
	}
	vs, err := stA.StateAt(ctx, stA.Rev(), store.Filter{Type: resource.ClusterURL, Name: "c"})
	if err != nil || len(vs) != 1 || !containsTag(vs[0], "v2") {
		t.Fatalf("c after the watched directory applied: %v %v", vs, err)
	}
}

// containsTag reports whether cluster variant v has alt_stat_name tag.
func containsTag(v *resource.Variant, tag string) bool {
	var cl clusterv3.Cluster
	return proto.Unmarshal(v.Body(), &cl) == nil && cl.AltStatName == tag
}
