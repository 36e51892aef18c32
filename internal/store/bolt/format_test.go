package bolt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// rawUpdate changes a closed store file directly, as another version of
// xdsd (or damage) would have left it.
func rawUpdate(t *testing.T, path string, fn func(tx *bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// rawView reads a closed store file directly.
func rawView(t *testing.T, path string, fn func(tx *bbolt.Tx)) {
	t.Helper()
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bbolt.Tx) error { fn(tx); return nil })
}

// history is what a store's log and revision records say: every revision
// record, and the changes since revision 0 as text.
func history(t *testing.T, s store.Store) (store.RevisionList, string) {
	t.Helper()
	revs, err := s.Revisions(context.Background(), store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.Changes(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("rev %d reset %v deletes %v", cs.Rev, cs.Reset, cs.Deletes)
	for _, v := range cs.Puts {
		text += fmt.Sprintf(" put %s@%s", v.Key(), v.Version)
	}
	return revs, text
}

// snapshot is a store's contents and history.
func snapshot(t *testing.T, s *bolt.Store) (map[resource.Key]string, store.RevisionList, string) {
	t.Helper()
	c, err := contents(t, s)
	if err != nil {
		t.Fatal(err)
	}
	revs, changes := history(t, s)
	return c, revs, changes
}

func setFormat(tx *bbolt.Tx, f uint64) error {
	return tx.Bucket([]byte("meta")).Put([]byte("format"), binary.BigEndian.AppendUint64(nil, f))
}

// A file of format 1 — each body inside its record, no bucket of bodies,
// as xdsd wrote before bodies were kept apart; each key of its log and
// history whole, as before format 3 — opens, reads back exactly (history
// too), is upgraded to format 3, takes new writes, and verifies; a file
// of a format this xdsd does not know is refused.
func TestFormat1FileIsReadAndUpgraded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	empty := resource.NewVariant(resource.ForURL(resource.ClusterURL), "empty", storetest.Cluster("x", "", "").Constraints, "", "", nil)
	b := store.Batch{Puts: []*resource.Variant{
		storetest.Cluster("a", "", "one"), storetest.Cluster("b", "", "one"),
		storetest.Route("r", "env=prod", "p"), empty, storetest.Cluster("gone", "", "g"),
	}}
	if _, err := s.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "one-b")},
		Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "gone", All: true}}}); err != nil {
		t.Fatal(err)
	}
	want, wantRevs, wantChanges := snapshot(t, s)
	s.Close()

	// Rewrite it as format 1, its log entries and revision records as
	// formats 1 and 2 wrote them.
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		res, bodies := tx.Bucket([]byte("resources")), tx.Bucket([]byte("bodies"))
		if bodies == nil || bodies.Stats().KeyN != 5 {
			t.Errorf("bodies bucket: %v; want 5 bodies apart: 3 current, 2 kept by history", bodies)
		}
		if err := bolt.RewriteHistoryAsFormat2(tx); err != nil {
			return err
		}
		var whole [][2][]byte
		err := res.ForEach(func(k, v []byte) error {
			key, err := store.SplitKey(k)
			if err != nil {
				return err
			}
			vr, err := store.DecodeHead(key, v, func(ref []byte) []byte { return bodies.Get(append(append([]byte(nil), ref...), k...)) })
			if err != nil {
				return err
			}
			rec, err := store.EncodeRecord(vr)
			whole = append(whole, [2][]byte{append([]byte(nil), k...), rec})
			return err
		})
		if err != nil {
			return err
		}
		for _, kv := range whole {
			if err := res.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket([]byte("bodies")); err != nil {
			return err
		}
		return setFormat(tx, 1)
	})
	if _, err := bolt.Verify(path); err != nil {
		t.Fatalf("format 1 file: %v", err)
	}

	s = open(t, path)
	got, err := contents(t, s)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("format 1 file: %s read back as %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("format 1 file: %d variants, want %d", len(got), len(want))
	}
	if revs, changes := history(t, s); !reflect.DeepEqual(revs, wantRevs) || changes != wantChanges {
		t.Errorf("format 1 file: history\n%+v\n%s\nwant\n%+v\n%s", revs, changes, wantRevs, wantChanges)
	}
	// One changed (its body now apart), one deleted, one left as it was.
	if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "two")},
		Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "b", All: true}}}); err != nil {
		t.Fatal(err)
	}
	want, err = contents(t, s)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := bolt.Verify(path); err != nil {
		t.Fatalf("upgraded file: %v", err)
	}
	s = open(t, path)
	got, err = contents(t, s)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[resource.Key{Type: resource.ClusterURL, Name: "a"}] != want[resource.Key{Type: resource.ClusterURL, Name: "a"}] ||
		!strings.Contains(got[resource.Key{Type: resource.ClusterURL, Name: "a"}], "two") {
		t.Errorf("after reopening the upgraded file: %q", got)
	}
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if f := tx.Bucket([]byte("meta")).Get([]byte("format")); binary.BigEndian.Uint64(f) != 3 {
			t.Errorf("format %d after the upgrade, want 3", binary.BigEndian.Uint64(f))
		}
		return setFormat(tx, 4)
	})
	if _, err := bolt.Open(path, bolt.Options{}); err == nil || !strings.Contains(err.Error(), "unsupported store format 4") {
		t.Errorf("a file of format 4 opened: %v", err)
	}
}

// A body kept apart is covered by its record's checksum: a missing,
// altered or orphaned body makes the file fail verification, and a
// missing or altered one is never served.
func TestBodiesApartAreChecked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		damage     func(bodies *bbolt.Bucket) error
	}{
		{"missing", "its body is missing", func(b *bbolt.Bucket) error { return b.Delete(firstKey(b)) }},
		{"altered", "checksum mismatch", func(b *bbolt.Bucket) error {
			k := firstKey(b)
			v := append([]byte(nil), b.Get(k)...)
			v[len(v)-1] ^= 1
			return b.Put(k, v)
		}},
		{"orphaned", "a body without its record", func(b *bbolt.Bucket) error { return b.Put([]byte("nobody\x00x\x00"), []byte("x")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "xdsd.db")
			s := open(t, path)
			if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "one")}}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			rawUpdate(t, path, func(tx *bbolt.Tx) error { return c.damage(tx.Bucket([]byte("bodies"))) })
			if _, err := bolt.Verify(path); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Verify: %v, want an error saying %q", err, c.want)
			}
			if c.name == "orphaned" {
				return
			}
			s, err := bolt.Open(path, bolt.Options{})
			if err == nil {
				_, err = contents(t, s)
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("reading: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func firstKey(b *bbolt.Bucket) []byte {
	k, _ := b.Cursor().First()
	return append([]byte(nil), k...)
}

// History keeps the bodies a revision replaced or removed where they are:
// its undo records are the records as they were, referring to them, not
// copies of them. Trimming a revision's history removes the bodies it
// kept, and the file verifies throughout.
func TestHistoryKeepsBodiesWithoutCopying(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s, err := bolt.Open(path, bolt.Options{History: 2})
	if err != nil {
		t.Fatal(err)
	}
	big := func(tag string) string { return strings.Repeat(tag, 4096) }
	apply := func(b store.Batch) {
		t.Helper()
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", big("1")), storetest.Cluster("b", "", big("1"))}})
	apply(store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", big("2"))},
		Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "b", All: true}}})
	at1, err := s.StateAt(ctx, 1, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(at1) != 2 || !bytes.Equal(at1[0].Body(), storetest.Cluster("a", "", big("1")).Body()) || !bytes.Equal(at1[1].Body(), storetest.Cluster("b", "", big("1")).Body()) {
		t.Errorf("state at revision 1: %v", at1)
	}
	s.Close()
	count := func() (bodies, undo int) {
		rawView(t, path, func(tx *bbolt.Tx) {
			bodies = tx.Bucket([]byte("bodies")).Stats().KeyN
			tx.Bucket([]byte("undo")).ForEach(func(k, v []byte) error {
				undo++
				if store.BodyRef(v) == nil || len(v) > 100 {
					t.Errorf("undo record %q: %d bytes, body apart: %v", k, len(v), store.BodyRef(v) != nil)
				}
				return nil
			})
		})
		return
	}
	if b, u := count(); b != 3 || u != 2 {
		t.Errorf("after revision 2: %d bodies, %d undo records; want 3 (a@1, b@1 kept by history; a@2) and 2", b, u)
	}
	if _, err := bolt.Verify(path); err != nil {
		t.Fatal(err)
	}
	if s, err = bolt.Open(path, bolt.Options{History: 2}); err != nil {
		t.Fatal(err)
	}
	apply(store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", big("3"))}})
	apply(store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", big("4"))}})
	s.Close()
	// Revision 4 trims revision 2's history, and with it a@1 and b@1.
	if b, u := count(); b != 3 || u != 2 {
		t.Errorf("after revision 4: %d bodies, %d undo records; want 3 (a@2, a@3 kept by history; a@4) and 2", b, u)
	}
	if _, err := bolt.Verify(path); err != nil {
		t.Fatal(err)
	}
}

// A file of format 2 — bodies kept under their record's key then the
// revision, history records with bodies inside — opens, its bodies moved
// under the keys of format 3, and reads back exactly, history too.
func TestFormat2FileIsUpgraded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	for _, b := range []store.Batch{
		{Puts: []*resource.Variant{storetest.Cluster("a", "", "one"), storetest.Cluster("b", "", "one"), storetest.Route("r", "env=prod", "p")}},
		{Puts: []*resource.Variant{storetest.Cluster("a", "", "two")}, Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "b", All: true}}},
	} {
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	want, wantRevs, wantChanges := snapshot(t, s)
	s.Close()
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		if err := bolt.RewriteHistoryAsFormat2(tx); err != nil {
			return err
		}
		// Only the bodies the current records refer to, under their old keys.
		res, bodies := tx.Bucket([]byte("resources")), tx.Bucket([]byte("bodies"))
		var kvs [][2][]byte
		res.ForEach(func(k, v []byte) error {
			if ref := store.BodyRef(v); ref != nil {
				body := bodies.Get(append(append([]byte(nil), ref...), k...))
				kvs = append(kvs, [2][]byte{append(append([]byte(nil), k...), ref...), bytes.Clone(body)})
			}
			return nil
		})
		if err := tx.DeleteBucket([]byte("bodies")); err != nil {
			return err
		}
		nb, err := tx.CreateBucket([]byte("bodies"))
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if err := nb.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return setFormat(tx, 2)
	})
	s = open(t, path)
	got, err := contents(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("format 2 file read back as\n%q\nwant\n%q", got, want)
	}
	if revs, changes := history(t, s); !reflect.DeepEqual(revs, wantRevs) || changes != wantChanges {
		t.Errorf("format 2 file: history\n%+v\n%s\nwant\n%+v\n%s", revs, changes, wantRevs, wantChanges)
	}
	if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "three")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := bolt.Verify(path); err != nil {
		t.Fatal(err)
	}
	rawView(t, path, func(tx *bbolt.Tx) {
		if f := tx.Bucket([]byte("meta")).Get([]byte("format")); binary.BigEndian.Uint64(f) != 3 {
			t.Errorf("format %d after the upgrade, want 3", binary.BigEndian.Uint64(f))
		}
	})
}

// A new file gets DefaultPageSize; a file made with another page size
// (4 KiB: every file before DefaultPageSize) keeps it, and reads back as
// written.
func TestPageSizeKept(t *testing.T) {
	pageSize := func(path string) uint32 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint32(b[16+8:]) // page header, magic, version
	}
	dir := t.TempDir()
	for _, made := range []int{0, 4096} {
		path := filepath.Join(dir, fmt.Sprint(made, ".db"))
		s, err := bolt.Open(path, bolt.Options{PageSize: made})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", "1")}}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		want := uint32(made)
		if made == 0 {
			want = bolt.DefaultPageSize
		}
		s, err = bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := s.Changes(context.Background(), store.FromStart)
		s.Close()
		if err != nil || len(cs.Puts) != 1 || !cs.Puts[0].SameContent(storetest.Cluster("a", "", "1")) {
			t.Errorf("made with page size %d: reopened as %v, %v", made, cs.Puts, err)
		}
		if got := pageSize(path); got != want {
			t.Errorf("made with page size %d: the file has %d-byte pages, want %d", made, got, want)
		}
	}
}
