package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// testStage: a staged revision's mark is kept with its record and read
// back as the store's staged revision while it is the latest; a promote
// that touches what it changed makes a revision of its own, re-stamping
// only the touched variants; after it, nothing is staged.
func testStage(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1"), Cluster("b", "", "1"),
		Route("r", "env=prod", "p1"), Route("r", "env=dev", "d1")}})
	if _, ok, err := store.Staged(ctx, s); err != nil || ok {
		t.Fatalf("before any stage: staged %v, %v", ok, err)
	}
	mark := &store.Stage{State: store.StateStaged, Canary: "25%", Bake: store.Duration(5 * time.Minute), AbortOnNack: true}
	b := store.Batch{Puts: []*resource.Variant{Cluster("a", "", "2"), Route("r", "env=prod", "p2"), Route("r", "env=dev", "d1")},
		Audit: store.Audit{Who: "alice", Via: "apply --canary 25%", Stage: mark}, IfRev: 1}
	store.MarkStage(&b)
	r := apply(t, s, b)
	if m, err := store.StageMark(ctx, s); err != nil || m != r.Rev {
		t.Fatalf("the stage mark: %d %v, want %d", m, err, r.Rev)
	}
	rec, ok, err := store.Staged(ctx, s)
	if err != nil || !ok || rec.Rev != r.Rev || !reflect.DeepEqual(rec.Audit.Stage, mark) {
		t.Fatalf("staged: %+v %v %v, want revision %d marked %+v", rec, ok, err, r.Rev, mark)
	}
	if got := rec.Resources(); len(got) != 2 {
		t.Fatalf("the staged revision's resources: %v, want cluster a and route r", got)
	}
	if at, ok, err := store.RecordAt(ctx, s, r.Rev); err != nil || !ok || at.Audit.Stage == nil || at.Audit.Stage.Canary != "25%" {
		t.Fatalf("RecordAt(%d): %+v %v %v", r.Rev, at, ok, err)
	}
	before := state(t, s)
	touch := map[resource.Key]bool{}
	for _, c := range rec.Changes {
		touch[c.Key] = true
	}
	var puts []*resource.Variant
	for _, v := range before {
		if touch[v.Key()] || v.Name == "r" {
			puts = append(puts, v)
		}
	}
	pb := store.Batch{Puts: puts, Touch: touch, IfRev: r.Rev,
		Audit: store.Audit{Via: "rollout promote 2", Stage: &store.Stage{State: store.StatePromoted, Of: r.Rev}}}
	store.MarkStage(&pb)
	p := apply(t, s, pb)
	if len(p.Puts) != len(touch) || p.Rev != r.Rev+1 {
		t.Fatalf("promote: %+v, want the %d touched variants re-stamped at %d", p, len(touch), r.Rev+1)
	}
	after := state(t, s)
	for k, v := range after {
		was := before[k]
		if string(v.Body()) != string(was.Body()) {
			t.Errorf("%s: the promote changed its content", k)
		}
		if touch[k] != (v.Version != was.Version) {
			t.Errorf("%s: version %s → %s (touched %v)", k, was.Version, v.Version, touch[k])
		}
	}
	if _, ok, err := store.Staged(ctx, s); err != nil || ok {
		t.Fatalf("after the promote: staged %v, %v", ok, err)
	}
	l, err := s.Revisions(ctx, store.HistoryQuery{Limit: 1})
	if err != nil || len(l.Revisions) != 1 || l.Revisions[0].Audit.Stage == nil || l.Revisions[0].Audit.Stage.Of != r.Rev {
		t.Fatalf("the promote's record: %+v %v", l, err)
	}
}
