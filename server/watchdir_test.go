package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
	"github.com/xdsd/xdsd/store"
	"github.com/xdsd/xdsd/store/bolt"
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
	w := &server.DirWatcher{Store: st, Dir: dir}
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
	if got["a "] != "3" || got["b "] != "" || got["from-api "] != "2" || got["r env=prod"] != "1" || got["r env=test"] != "" || len(got) != 3 {
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
