package origin_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

const cl = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"

func write(t *testing.T, dir, name, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	cs, err := st.Changes(context.Background(), store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, v := range cs.Puts {
		out[v.Name+" "+v.Constraints.String()] = v.Version
	}
	return out
}

// A watched directory is applied whole; a changed file changes only what it
// changed; a removed document deletes what it defined and nothing else; an
// invalid edit changes nothing.
func TestDirWatcher(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	w := &origin.DirWatcher{Store: st, Dir: dir}
	write(t, dir, "a.yaml", cl+"name: a\n---\n"+cl+"name: b\n")
	write(t, dir, "tp2.yaml", "name: r\nconstraints: env=prod\nresource:\n  "+cl+"---\nname: r\nconstraints: env=test\nresource:\n  "+cl)
	if applied, err := w.Sync(ctx); !applied || err != nil {
		t.Fatalf("first sync: %v %v", applied, err)
	}
	if applied, err := w.Sync(ctx); applied || err != nil {
		t.Fatalf("unchanged directory re-applied: %v %v", applied, err)
	}
	// Something applied through the API, not from the directory.
	docs, err := resource.Decode("api", []byte(cl+"name: from-api\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, store.Batch{Puts: []*resource.Variant{docs[0].Variant}}); err != nil {
		t.Fatal(err)
	}

	write(t, dir, "a.yaml", cl+"name: a\nalt_stat_name: changed\n")
	write(t, dir, "tp2.yaml", "name: r\nconstraints: env=prod\nresource:\n  "+cl)
	if applied, err := w.Sync(ctx); !applied || err != nil {
		t.Fatalf("sync after edit: %v %v", applied, err)
	}
	got := names(t, st)
	if got["a "] != "3" || got["b "] != "" || got["from-api "] != "2" || got["r env=prod"] != store.Version(1, "env=prod") || got["r env=test"] != "" || len(got) != 3 {
		t.Fatalf("after edit: %v", got)
	}

	write(t, dir, "a.yaml", cl+"name: a\nbogus: 1\n")
	if applied, err := w.Sync(ctx); applied || err == nil {
		t.Fatalf("invalid edit: %v %v", applied, err)
	}
	if st.Rev() != 3 {
		t.Fatalf("invalid edit changed the store: rev %d", st.Rev())
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if applied, err := w.Sync(ctx); !applied || err != nil {
		t.Fatalf("sync after removal: %v %v", applied, err)
	}
	got = names(t, st)
	if _, ok := got["a "]; ok || got["from-api "] == "" || got["r env=prod"] == "" {
		t.Fatalf("after removing a.yaml: %v", got)
	}
}

func openBolt(t *testing.T, path string) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func sync(t *testing.T, w *origin.DirWatcher) {
	t.Helper()
	if applied, err := w.Sync(context.Background()); !applied || err != nil {
		t.Fatalf("sync %s: applied %v, %v", w.Dir, applied, err)
	}
}

func applyAPI(t *testing.T, st store.Store, src string) {
	t.Helper()
	docs, err := resource.Decode("api", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var b store.Batch
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
	}
	if _, err := st.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

func ownedRecord(t *testing.T, st store.Store, dir string) string {
	t.Helper()
	k, err := origin.OwnershipKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.Meta(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// What a watched directory defined survives a restart: a file removed while
// no server ran deletes what it defined at the next start, and nothing else
// (not what was applied through the API before the directory was first
// watched, nor after). A bad file found at start applies nothing and keeps
// the record; once fixed, the removal goes through.
func TestDirWatcherRemembersAcrossRestart(t *testing.T) {
	dir, db := t.TempDir(), filepath.Join(t.TempDir(), "x.db")
	st := openBolt(t, db)
	applyAPI(t, st, cl+"name: before\n") // rev 1: the store is not empty at the first watch
	write(t, dir, "a.yaml", cl+"name: a\n")
	write(t, dir, "b.yaml", cl+"name: b\n---\nname: r\nconstraints: env=prod\nresource:\n  "+cl+"---\nname: r\nconstraints: env=test\nresource:\n  "+cl)
	sync(t, &origin.DirWatcher{Store: st, Dir: dir}) // rev 2
	applyAPI(t, st, cl+"name: after\n")              // rev 3
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted with nothing changed: no revision.
	st = openBolt(t, db)
	sync(t, &origin.DirWatcher{Store: st, Dir: dir})
	if st.Rev() != 3 {
		t.Fatalf("an unchanged directory made revision %d at restart", st.Rev())
	}
	st.Close()

	// b.yaml removed and a bad file added while down.
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "c.yaml", cl+"name: c\nbogus: 1\n")
	st = openBolt(t, db)
	defer func() { st.Close() }()
	rec := ownedRecord(t, st, dir)
	w := &origin.DirWatcher{Store: st, Dir: dir}
	if applied, err := w.Sync(context.Background()); applied || err == nil || !strings.Contains(err.Error(), "c.yaml") {
		t.Fatalf("sync with a bad file: applied %v, %v", applied, err)
	}
	if got := names(t, st); st.Rev() != 3 || len(got) != 6 || ownedRecord(t, st, dir) != rec {
		t.Fatalf("a bad file changed the store: rev %d, %v", st.Rev(), got)
	}
	write(t, dir, "c.yaml", cl+"name: c\n")
	sync(t, w)
	want := map[string]string{"before ": "1", "a ": "2", "after ": "3", "c ": "4"}
	if got := names(t, st); !maps.Equal(got, want) {
		t.Fatalf("after removing b.yaml while down: %v, want %v", got, want)
	}

	// And the next start remembers the new record.
	if err := os.Remove(filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = openBolt(t, db)
	sync(t, &origin.DirWatcher{Store: st, Dir: dir})
	want = map[string]string{"before ": "1", "a ": "2", "after ": "3"}
	if got := names(t, st); !maps.Equal(got, want) {
		t.Fatalf("after removing c.yaml while down: %v, want %v", got, want)
	}
}

// A resource moved from one file to another is still defined: it is neither
// deleted nor changed, whether the move happens under a running watcher or
// while none runs.
func TestDirWatcherMoveBetweenFiles(t *testing.T) {
	dir, db := t.TempDir(), filepath.Join(t.TempDir(), "x.db")
	st := openBolt(t, db)
	write(t, dir, "a.yaml", cl+"name: mx\n---\n"+cl+"name: my\n")
	w := &origin.DirWatcher{Store: st, Dir: dir}
	sync(t, w)

	write(t, dir, "b.yaml", cl+"name: my\n")
	write(t, dir, "a.yaml", cl+"name: mx\n")
	sync(t, w)
	if got := names(t, st); st.Rev() != 1 || got["mx "] != "1" || got["my "] != "1" || len(got) != 2 {
		t.Fatalf("after moving my to b.yaml: rev %d, %v", st.Rev(), got)
	}

	st.Close()
	write(t, dir, "a.yaml", cl+"name: mx\n---\n"+cl+"name: my\n")
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	st = openBolt(t, db)
	defer st.Close()
	sync(t, &origin.DirWatcher{Store: st, Dir: dir})
	if got := names(t, st); st.Rev() != 1 || got["mx "] != "1" || got["my "] != "1" || len(got) != 2 {
		t.Fatalf("after moving my back while down: rev %d, %v", st.Rev(), got)
	}
}

// Two watched directories keep separate records: removing a file from one
// deletes nothing the other defined, across restarts too.
func TestDirWatcherTwoDirectories(t *testing.T) {
	one, two, db := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "x.db")
	st := openBolt(t, db)
	write(t, one, "a.yaml", cl+"name: one-a\n")
	write(t, one, "b.yaml", cl+"name: one-b\n")
	write(t, two, "a.yaml", cl+"name: two-a\n")
	w1, w2 := &origin.DirWatcher{Store: st, Dir: one}, &origin.DirWatcher{Store: st, Dir: two}
	sync(t, w1)
	sync(t, w2)
	if err := os.Remove(filepath.Join(one, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	sync(t, w1)
	if got := names(t, st); len(got) != 2 || got["one-b "] == "" || got["two-a "] == "" {
		t.Fatalf("after removing one/a.yaml: %v", got)
	}
	st.Close()

	// While down, each directory loses its last file.
	for _, p := range []string{filepath.Join(one, "b.yaml"), filepath.Join(two, "a.yaml")} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	st = openBolt(t, db)
	defer st.Close()
	sync(t, &origin.DirWatcher{Store: st, Dir: two})
	if got := names(t, st); len(got) != 1 || got["one-b "] == "" {
		t.Fatalf("after syncing the emptied second directory: %v", got)
	}
	sync(t, &origin.DirWatcher{Store: st, Dir: one})
	if got := names(t, st); len(got) != 0 {
		t.Fatalf("after syncing both emptied directories: %v", got)
	}
}

// A directory's record is keyed by its absolute path, so a relative path
// names the same record.
func TestOwnershipKey(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := origin.OwnershipKey("testdata/../conf")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := origin.OwnershipKey(filepath.Join(wd, "conf"))
	if err != nil || rel != abs || abs != "watch:"+filepath.Join(wd, "conf") {
		t.Fatalf("OwnershipKey: relative %q, absolute %q (%v)", rel, abs, err)
	}
}

// flakyStore fails the next Apply with a store error (not a bad batch).
type flakyStore struct {
	store.Store
	fail bool
}

func (f *flakyStore) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	if f.fail {
		f.fail = false
		return store.Result{}, errors.New("disk on fire")
	}
	return f.Store.Apply(ctx, b)
}

// A failure of the store, unlike a bad directory, is retried at the next
// Sync even though the directory did not change.
func TestDirWatcherRetriesStoreFailure(t *testing.T) {
	dir := t.TempDir()
	st := &flakyStore{Store: mem.New(), fail: true}
	defer st.Close()
	write(t, dir, "a.yaml", cl+"name: a\n")
	w := &origin.DirWatcher{Store: st, Dir: dir}
	if applied, err := w.Sync(context.Background()); applied || err == nil {
		t.Fatalf("sync into a failing store: %v %v", applied, err)
	}
	sync(t, w)
	if got := names(t, st); got["a "] != "1" || ownedRecord(t, st, dir) == "" {
		t.Fatalf("after the retry: %v, record %q", got, ownedRecord(t, st, dir))
	}
}
