package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// snapshot is a state as a comparable text: key, version and content of
// every variant.
func snapshot(vs []*resource.Variant) string {
	out := ""
	for _, v := range vs {
		out += fmt.Sprintf("%s@%s=%x\n", v.Key(), v.Version, v.Body())
	}
	return out
}

func current(t *testing.T, s store.Store, f store.Filter) []*resource.Variant {
	t.Helper()
	vs, err := s.StateAt(context.Background(), s.Rev(), f)
	if err != nil {
		t.Fatalf("StateAt(current): %v", err)
	}
	return vs
}

// testHistory applies a sequence of batches (creates, updates, a TP2
// variant set replaced, deletes) and checks that every revision's record
// says what changed and who did it, and that the state at every revision,
// whole or filtered, is what it was when that revision was current.
func testHistory(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	batches := []store.Batch{
		{Puts: []*resource.Variant{Cluster("a", "", "1"), Cluster("b", "", "1"), Route("r", "env=prod", "p")}, Audit: store.Audit{Who: "alice", From: "127.0.0.1:1", Via: "apply"}},
		{Puts: []*resource.Variant{Cluster("a", "", "2")}, Audit: store.Audit{Who: "bob", Via: "apply"}},
		{Puts: []*resource.Variant{Route("r", "env=prod && version=v1", "p1"), Route("r", "env=prod && version=v2", "p2")}, Audit: store.Audit{Via: "watch dir"}},
		{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "b", All: true}}, Audit: store.Audit{Who: "carol", Via: "delete"}},
		{Puts: []*resource.Variant{Cluster("b", "", "3"), Cluster("a", "", "2")}},
	}
	filters := []store.Filter{{}, {Type: resource.ClusterURL}, {Type: resource.ClusterURL, Name: "b"}, {Type: resource.RouteURL, Name: "r"}, {Name: "a"}}
	want := map[int64]map[store.Filter]string{0: {}}
	for _, f := range filters {
		want[0][f] = ""
	}
	for i, b := range batches {
		r := apply(t, s, b)
		if r.Rev != int64(i+1) {
			t.Fatalf("batch %d made revision %d", i, r.Rev)
		}
		want[r.Rev] = map[store.Filter]string{}
		for _, f := range filters {
			want[r.Rev][f] = snapshot(current(t, s, f))
		}
	}
	if got := want[5][store.Filter{}]; got == "" || got == want[4][store.Filter{}] {
		t.Fatalf("state after the last batch: %q", got)
	}
	for rev := int64(0); rev <= 5; rev++ {
		for _, f := range filters {
			vs, err := s.StateAt(ctx, rev, f)
			if err != nil {
				t.Fatalf("StateAt(%d, %+v): %v", rev, f, err)
			}
			if got := snapshot(vs); got != want[rev][f] {
				t.Errorf("StateAt(%d, %+v):\\n%s\\nwant\\n%s", rev, f, got, want[rev][f])
			}
		}
	}
	if _, err := s.StateAt(ctx, 6, store.Filter{}); !errors.Is(err, store.ErrNoRevision) {
		t.Errorf("StateAt(future) = %v, want ErrNoRevision", err)
	}

	l, err := s.Revisions(ctx, store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Rev != 5 || l.Oldest != 0 || len(l.Revisions) != 5 {
		t.Fatalf("revisions: rev %d oldest %d, %d records", l.Rev, l.Oldest, len(l.Revisions))
	}
	for i, r := range l.Revisions {
		if r.Rev != int64(5-i) || r.Time.IsZero() || r.Audit != batches[4-i].Audit {
			t.Errorf("record %d: rev %d time %v audit %+v", i, r.Rev, r.Time, r.Audit)
		}
	}
	ops := func(r store.Revision) string {
		out := ""
		for _, c := range r.Changes {
			out += fmt.Sprintf("%s %s %q %s;", c.Op, c.Key.Name, c.Key.Constraints, c.Version)
		}
		return out
	}
	r3 := l.Revisions[2]
	v1, v2 := Route("r", "env=prod && version=v1", ""), Route("r", "env=prod && version=v2", "")
	if got, want := ops(r3), fmt.Sprintf(`deleted r %q ;created r %q %s;created r %q %s;`, Route("r", "env=prod", "").Constraints.Key(),
		v1.Constraints.Key(), store.Version(3, v1.Constraints.Key()), v2.Constraints.Key(), store.Version(3, v2.Constraints.Key())); got != want || r3.Total != 3 {
		t.Errorf("revision 3: %s (total %d), want %s", got, r3.Total, want)
	}
	if got := ops(l.Revisions[3]); got != `updated a "" 2;` {
		t.Errorf("revision 2: %s", got)
	}
	if got := ops(l.Revisions[1]); got != `deleted b "" ;` {
		t.Errorf("revision 4: %s", got)
	}
	// Only b changed in revision 5: a was put with equal content.
	if got := ops(l.Revisions[0]); got != `created b "" 5;` {
		t.Errorf("revision 5: %s", got)
	}

	l, err = s.Revisions(ctx, store.HistoryQuery{Filter: store.Filter{Type: resource.ClusterURL, Name: "b"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Revisions) != 2 || l.Revisions[0].Rev != 5 || l.Revisions[1].Rev != 4 || l.Revisions[1].Total != 1 {
		t.Fatalf("filtered, limit 2: %+v", l.Revisions)
	}
	l, err = s.Revisions(ctx, store.HistoryQuery{Filter: store.Filter{Type: resource.ClusterURL, Name: "b"}, Before: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Revisions) != 1 || l.Revisions[0].Rev != 1 || len(l.Revisions[0].Changes) != 1 || l.Revisions[0].Total != 3 {
		t.Fatalf("filtered, before 4: %+v", l.Revisions)
	}
}

// testIfRev: a batch computed at an older revision is refused, and
// nothing of it is stored.
func testIfRev(t *testing.T, s store.Store) {
	defer s.Close()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1")}})
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "2")}, IfRev: 1})
	_, err := s.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{Cluster("a", "", "3"), Cluster("z", "", "3")}, IfRev: 1})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale IfRev: %v, want ErrConflict", err)
	}
	if st := state(t, s); s.Rev() != 2 || len(st) != 1 || string(st[key(Cluster("a", "", ""))].Body()) != string(Cluster("a", "", "2").Body()) {
		t.Fatalf("after a refused batch: rev %d, %v", s.Rev(), Keys(st))
	}
}

// Compaction checks a store that keeps n revisions of history (n < 5):
// older revisions are refused with ErrCompacted, newer ones still
// restore, and the list says what is kept.
func Compaction(t *testing.T, s store.Store, n int) {
	defer s.Close()
	ctx := context.Background()
	states := map[int64]string{}
	for i := 1; i <= 6; i++ {
		r := apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", fmt.Sprint(i)), Cluster(fmt.Sprint("c", i), "", "x")}})
		states[r.Rev] = snapshot(current(t, s, store.Filter{}))
	}
	l, err := s.Revisions(ctx, store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	oldest := int64(6 - n)
	if l.Oldest != oldest || len(l.Revisions) != n || l.Revisions[n-1].Rev != oldest+1 {
		t.Fatalf("kept: oldest %d, %d records (want oldest %d, %d records)", l.Oldest, len(l.Revisions), oldest, n)
	}
	if _, err := s.StateAt(ctx, oldest-1, store.Filter{}); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("StateAt(%d) = %v, want ErrCompacted", oldest-1, err)
	}
	for rev := oldest; rev <= 6; rev++ {
		vs, err := s.StateAt(ctx, rev, store.Filter{})
		if err != nil {
			t.Fatalf("StateAt(%d): %v", rev, err)
		}
		if got := snapshot(vs); got != states[rev] {
			t.Errorf("StateAt(%d):\\n%s\\nwant\\n%s", rev, got, states[rev])
		}
	}
}
