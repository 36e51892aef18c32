package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Cluster makes a Cluster variant whose payload depends on tag, so that a
// different tag is a content change.
func Cluster(name, cons, tag string) *resource.Variant {
	body, err := resource.Marshal(&clusterv3.Cluster{Name: name, AltStatName: tag})
	if err != nil {
		panic(err)
	}
	return resource.NewVariant(resource.ForURL(resource.ClusterURL), name, constraint.MustParse(cons), "", "", body)
}

// Route makes a RouteConfiguration variant.
func Route(name, cons, tag string) *resource.Variant {
	body, err := resource.Marshal(&routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: tag, Domains: []string{"*"}}}})
	if err != nil {
		panic(err)
	}
	return resource.NewVariant(resource.ForURL(resource.RouteURL), name, constraint.MustParse(cons), "", "", body)
}

// Open creates a fresh, empty store for one test.
type Open func(t *testing.T) store.Store

// Run runs the conformance suite.
func Run(t *testing.T, open Open) {
	t.Run("ApplyAndRead", func(t *testing.T) { testApplyAndRead(t, open(t)) })
	t.Run("UnchangedKeepsVersion", func(t *testing.T) { testUnchanged(t, open(t)) })
	t.Run("VariantSetReplacedAtomically", func(t *testing.T) { testReplace(t, open(t)) })
	t.Run("InvalidBatchStoresNothing", func(t *testing.T) { testInvalid(t, open(t)) })
	t.Run("MetaWrittenWithBatch", func(t *testing.T) { testMeta(t, open(t)) })
	t.Run("Deletes", func(t *testing.T) { testDeletes(t, open(t)) })
	t.Run("WatchResumesFromRevision", func(t *testing.T) { testWatch(t, open(t)) })
	t.Run("ConcurrentAppliers", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("ClosedStore", func(t *testing.T) { testClosed(t, open(t)) })
	t.Run("History", func(t *testing.T) { testHistory(t, open(t)) })
	t.Run("IfRev", func(t *testing.T) { testIfRev(t, open(t)) })
	t.Run("Keyring", func(t *testing.T) { testKeyring(t, open(t)) })
	t.Run("Stage", func(t *testing.T) { testStage(t, open(t)) })
}

func apply(t *testing.T, s store.Store, b store.Batch) store.Result {
	t.Helper()
	r, err := s.Apply(context.Background(), b)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return r
}

func state(t *testing.T, s store.Store) map[resource.Key]*resource.Variant {
	t.Helper()
	cs, err := s.Changes(context.Background(), store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	if !cs.Reset {
		t.Fatalf("Changes(FromStart) is not a reset")
	}
	m := map[resource.Key]*resource.Variant{}
	for _, v := range cs.Puts {
		m[v.Key()] = v
	}
	return m
}

func key(v *resource.Variant) resource.Key { return v.Key() }

func testApplyAndRead(t *testing.T, s store.Store) {
	defer s.Close()
	if s.Rev() != 0 {
		t.Fatalf("new store at rev %d", s.Rev())
	}
	a, b := Cluster("a", "", "1"), Route("r", "env=prod", "1")
	r := apply(t, s, store.Batch{Puts: []*resource.Variant{a, b}})
	if r.Rev != 1 || len(r.Puts) != 2 || s.Rev() != 1 {
		t.Fatalf("result %+v rev %d", r, s.Rev())
	}
	st := state(t, s)
	// A TP2 variant's version is the revision with its constraints' hash.
	if len(st) != 2 || st[key(a)].Version != "1" || st[key(b)].Version != store.Version(1, b.Constraints.Key()) || !strings.HasPrefix(st[key(b)].Version, "1-") {
		t.Fatalf("state %v", st)
	}
	if got := st[key(b)]; string(got.Body()) != string(b.Body()) || !got.Constraints.Equal(b.Constraints) || got.Type.URL != resource.RouteURL {
		t.Errorf("read back %+v", got)
	}
}

func testUnchanged(t *testing.T, s store.Store) {
	defer s.Close()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1"), Cluster("b", "", "1")}})
	r := apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1"), Cluster("b", "", "1")}})
	if r.Changed() || r.Rev != 1 || s.Rev() != 1 {
		t.Fatalf("re-applying equal content made a revision: %+v", r)
	}
	r = apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1"), Cluster("b", "", "2")}})
	if r.Rev != 2 || len(r.Puts) != 1 || r.Puts[0].Name != "b" {
		t.Fatalf("result %+v", r)
	}
	st := state(t, s)
	if st[key(Cluster("a", "", ""))].Version != "1" || st[key(Cluster("b", "", ""))].Version != "2" {
		t.Errorf("versions: a=%s b=%s", st[key(Cluster("a", "", ""))].Version, st[key(Cluster("b", "", ""))].Version)
	}
}

// TP2's transition: {env=prod} replaced by {env=prod,version=v1} and
// {env=prod,version=v2} in one batch and one revision.
func testReplace(t *testing.T, s store.Store) {
	defer s.Close()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Route("r", "env=prod", "p"), Route("r", "env=test", "t")}})
	w := store.Watch(s, 1)
	r := apply(t, s, store.Batch{Puts: []*resource.Variant{
		Route("r", "env=prod && version=v1", "p1"), Route("r", "env=prod && version=v2", "p2"),
		Route("r", "env=test && version=v1", "t"), Route("r", "env=test && version=v2", "t2"),
	}})
	if r.Rev != 2 || len(r.Puts) != 4 || len(r.Deletes) != 2 {
		t.Fatalf("result %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Rev != 2 || len(cs.Puts) != 4 || len(cs.Deletes) != 2 {
		t.Fatalf("one change set expected, got %+v", cs)
	}
	if len(state(t, s)) != 4 {
		t.Errorf("state after replace: %v", state(t, s))
	}
}

func testInvalid(t *testing.T, s store.Store) {
	defer s.Close()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Route("r", "env=prod", "p")}, Meta: map[string][]byte{"kept": []byte("1"), "gone": []byte("1")}})
	// Every bad batch also changes metadata, which must stay as it was.
	meta := map[string][]byte{"kept": []byte("2"), "gone": nil, "new": []byte("1")}
	bad := []struct {
		name string
		b    store.Batch
		want any
	}{
		{"empty metadata key", store.Batch{Puts: []*resource.Variant{Cluster("ok", "", "x")}, Meta: map[string][]byte{"": []byte("x")}}, nil},
		{"long metadata key", store.Batch{Meta: map[string][]byte{strings.Repeat("k", store.MaxMetaKey+1): []byte("x")}}, nil},
		{"overlap", store.Batch{Puts: []*resource.Variant{Cluster("ok", "", "x"), Route("r", "env=prod || env=test", "a"), Route("r", "env=qa || env=test", "b")}}, &constraint.OverlapError{}},
		{"key sets", store.Batch{Puts: []*resource.Variant{Cluster("ok", "", "x"), Route("r", "env=prod", "a"), Route("r", "env=test && version=v1", "b")}}, &constraint.KeySetError{}},
		{"duplicate", store.Batch{Puts: []*resource.Variant{Cluster("ok", "", "x"), Cluster("ok", "", "y")}}, nil},
		{"put and delete", store.Batch{Puts: []*resource.Variant{Cluster("ok", "", "x")}, Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "ok", All: true}}}, nil},
	}
	for _, tc := range bad {
		for k, v := range meta {
			if _, ok := tc.b.Meta[k]; !ok {
				if tc.b.Meta == nil {
					tc.b.Meta = map[string][]byte{}
				}
				tc.b.Meta[k] = v
			}
		}
		_, err := s.Apply(context.Background(), tc.b)
		var be *store.BatchError
		if !errors.As(err, &be) {
			t.Errorf("%s: err = %v, want a BatchError", tc.name, err)
		}
		switch tc.want.(type) {
		case *constraint.OverlapError:
			var oe *constraint.OverlapError
			if !errors.As(err, &oe) || oe.Witness["env"] != "test" {
				t.Errorf("%s: err = %v, want an OverlapError with witness env=test", tc.name, err)
			}
		case *constraint.KeySetError:
			var ke *constraint.KeySetError
			if !errors.As(err, &ke) {
				t.Errorf("%s: err = %v, want a KeySetError", tc.name, err)
			}
		}
		if s.Rev() != 1 || len(state(t, s)) != 1 {
			t.Errorf("%s: store changed: rev %d", tc.name, s.Rev())
		}
		if got := metaOf(t, s, "kept", "gone", "new"); got != "kept=1 gone=1 new=<nil>" {
			t.Errorf("%s: metadata changed: %s", tc.name, got)
		}
	}
}

// metaOf reads metadata keys, for comparing in one string.
func metaOf(t *testing.T, s store.Store, keys ...string) string {
	t.Helper()
	var out []string
	for _, k := range keys {
		v, err := s.Meta(context.Background(), k)
		if err != nil {
			t.Fatalf("Meta(%q): %v", k, err)
		}
		if v == nil {
			out = append(out, k+"=<nil>")
		} else {
			out = append(out, k+"="+string(v))
		}
	}
	return strings.Join(out, " ")
}

// Metadata lands with the batch that carries it, is not versioned (a batch
// changing only metadata makes no revision and wakes no watcher), and is
// copied in and out.
func testMeta(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	if v, err := s.Meta(ctx, "missing"); v != nil || err != nil {
		t.Fatalf("Meta of an unset key: %q %v", v, err)
	}
	val := []byte("a1")
	r := apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("c", "", "1")}, Meta: map[string][]byte{"a": val, "b": []byte("b1")}})
	val[1] = 'X' // the store holds its own copy
	if r.Rev != 1 || metaOf(t, s, "a", "b") != "a=a1 b=b1" {
		t.Fatalf("after the first batch: %+v, %s", r, metaOf(t, s, "a", "b"))
	}
	got, _ := s.Meta(ctx, "a")
	got[0] = 'X' // and hands out copies
	if metaOf(t, s, "a") != "a=a1" {
		t.Fatalf("a read value aliases the store: %s", metaOf(t, s, "a"))
	}

	// Metadata alone, or with puts that change nothing: no revision, no
	// wake-up, but the metadata is written.
	woken := s.Updated()
	r = apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("c", "", "1")}, Meta: map[string][]byte{"a": []byte("a2")}})
	if r.Changed() || r.Rev != 1 || s.Rev() != 1 || metaOf(t, s, "a", "b") != "a=a2 b=b1" {
		t.Fatalf("metadata-only batch: %+v rev %d, %s", r, s.Rev(), metaOf(t, s, "a", "b"))
	}
	// Rewriting equal metadata changes nothing either.
	apply(t, s, store.Batch{Meta: map[string][]byte{"a": []byte("a2")}})
	// nil and empty values delete; deleting an unset key is no error.
	r = apply(t, s, store.Batch{Meta: map[string][]byte{"a": nil, "b": {}, "never": nil}})
	if r.Changed() || metaOf(t, s, "a", "b", "never") != "a=<nil> b=<nil> never=<nil>" {
		t.Fatalf("deleting metadata: %+v, %s", r, metaOf(t, s, "a", "b", "never"))
	}
	select {
	case <-woken:
		t.Fatal("a metadata-only batch woke watchers")
	default:
	}
	if cs, err := s.Changes(ctx, 1); err != nil || !cs.Empty() || cs.Rev != 1 {
		t.Fatalf("changes after metadata-only batches: %+v %v", cs, err)
	}

	// With a resource change, both land in the same revision.
	r = apply(t, s, store.Batch{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "c", All: true}}, Meta: map[string][]byte{"a": []byte("a3")}})
	if r.Rev != 2 || len(r.Deletes) != 1 || metaOf(t, s, "a") != "a=a3" || len(state(t, s)) != 0 {
		t.Fatalf("delete with metadata: %+v, %s", r, metaOf(t, s, "a"))
	}
	select {
	case <-woken:
	default:
		t.Fatal("a batch with a resource change did not wake watchers")
	}
}

func testDeletes(t *testing.T, s store.Store) {
	defer s.Close()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Route("r", "env=prod", "p"), Route("r", "env=test", "t"), Cluster("c", "", "1")}})
	r := apply(t, s, store.Batch{Deletes: []store.Delete{{Type: resource.RouteURL, Name: "r", Constraints: constraint.MustParse("env=test").Key()}}})
	if r.Rev != 2 || len(r.Deletes) != 1 {
		t.Fatalf("delete one variant: %+v", r)
	}
	r = apply(t, s, store.Batch{Deletes: []store.Delete{{Type: resource.RouteURL, Name: "missing", All: true}}})
	if r.Changed() || r.Rev != 2 {
		t.Fatalf("deleting nothing made a revision: %+v", r)
	}
	r = apply(t, s, store.Batch{Deletes: []store.Delete{{Type: resource.RouteURL, Name: "r", All: true}, {Type: resource.ClusterURL, Name: "c", All: true}}})
	if r.Rev != 3 || len(r.Deletes) != 2 || len(state(t, s)) != 0 {
		t.Fatalf("delete all: %+v, state %v", r, state(t, s))
	}
}

func testWatch(t *testing.T, s store.Store) {
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := store.Watch(s, store.FromStart)
	cs, err := w.Next(ctx)
	if err != nil || !cs.Reset || cs.Rev != 0 || len(cs.Puts) != 0 {
		t.Fatalf("first Next on an empty store: %+v %v", cs, err)
	}
	// Next blocks until an apply.
	got := make(chan store.ChangeSet, 1)
	go func() {
		cs, err := w.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("a", "", "1")}})
	select {
	case cs := <-got:
		if cs.Rev != 1 || len(cs.Puts) != 1 || cs.Reset {
			t.Fatalf("change %+v", cs)
		}
	case <-ctx.Done():
		t.Fatal("watcher not woken by apply")
	}
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("b", "", "1")}})
	apply(t, s, store.Batch{Puts: []*resource.Variant{Cluster("b", "", "2")}})
	apply(t, s, store.Batch{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "a", All: true}}})
	// A watcher resuming from revision 1 gets revisions 2–4 coalesced.
	cs, err = store.Watch(s, 1).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Rev != 4 || cs.Reset || len(cs.Puts) != 1 || cs.Puts[0].Version != "3" || len(cs.Deletes) != 1 || cs.Deletes[0].Name != "a" {
		t.Fatalf("resumed change set %+v", cs)
	}
	// And the first watcher sees the same, from where it was.
	cs, err = w.Next(ctx)
	if err != nil || cs.Rev != 4 || len(cs.Puts) != 1 || len(cs.Deletes) != 1 {
		t.Fatalf("coalesced change set %+v %v", cs, err)
	}
}

func testConcurrent(t *testing.T, s store.Store) {
	defer s.Close()
	const writers, batches = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				b := store.Batch{Puts: []*resource.Variant{
					Cluster(fmt.Sprintf("w%d-b%d-x", w, i), "", "1"),
					Cluster(fmt.Sprintf("w%d-b%d-y", w, i), "", "1"),
				}}
				if _, err := s.Apply(context.Background(), b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st := state(t, s)
	if s.Rev() != writers*batches || len(st) != 2*writers*batches {
		t.Fatalf("rev %d, %d variants", s.Rev(), len(st))
	}
	// Each batch got its own revision, shared by both of its variants.
	revs := map[string]bool{}
	for w := range writers {
		for i := range batches {
			x := st[key(Cluster(fmt.Sprintf("w%d-b%d-x", w, i), "", ""))]
			y := st[key(Cluster(fmt.Sprintf("w%d-b%d-y", w, i), "", ""))]
			if x.Version != y.Version || revs[x.Version] {
				t.Fatalf("batch w%d-b%d versions %s/%s", w, i, x.Version, y.Version)
			}
			revs[x.Version] = true
		}
	}
}

func testClosed(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := store.Watch(s, store.FromStart)
	if _, err := w.Next(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Next(ctx)
		done <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("watcher after close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("watcher not released by Close")
	}
	if _, err := s.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{Cluster("a", "", "")}}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("apply after close: %v", err)
	}
	if _, err := s.Meta(context.Background(), "a"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Meta after close: %v", err)
	}
}

// Keys lists a state's keys, sorted, for messages.
func Keys(m map[resource.Key]*resource.Variant) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out
}
