package admin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/mem"
)

// A body sent as application/json must be strict JSON: YAML's flow style
// (single quotes, a trailing comma) is refused with the line and column,
// and nothing is applied. Without that content type it is read as YAML.
func TestApplyJSONIsStrict(t *testing.T) {
	st := mem.New()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	post := func(ctype, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/apply?source=body", ctype, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	const lax = `{'@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', "name": "a",}`
	code, body := post("application/json; charset=utf-8", lax)
	if code != http.StatusBadRequest || !strings.Contains(body, `"line": 1,`) || !strings.Contains(body, `"column": 2,`) || !strings.Contains(body, `invalid JSON: invalid character`) {
		t.Errorf("lax JSON as application/json: %d %s", code, body)
	}
	if st.Rev() != 0 {
		t.Errorf("applied: revision %d", st.Rev())
	}
	if code, body := post("application/yaml", lax); code != http.StatusOK {
		t.Errorf("the same as YAML: %d %s", code, body)
	}
}

// With a bolt store, an apply's payloads are prewritten while the rest of it
// is read. A batch refused after some were (a bad document at its end, a
// body cut short) leaves nothing in the file; one that goes ahead is
// stored whole.
func TestApplyPrewrittenAsRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	st, err := bolt.Open(path, bolt.Options{PrewriteBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	docs := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "---\n\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c%03d\nconnect_timeout: 1s\n", i)
		}
		return b.String()
	}
	post := func(body io.Reader) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/apply?source=body", "application/yaml", body)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(strings.NewReader(docs(200) + "---\nname: no type\n")); code != http.StatusBadRequest {
		t.Errorf("a bad document at the end: %d %s", code, body)
	}
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(docs(200)))
		pw.CloseWithError(errors.New("cut short"))
	}()
	if code, body := post(pr); code == http.StatusOK {
		t.Errorf("a body cut short: %d %s", code, body)
	}
	if st.Rev() != 0 {
		t.Fatalf("applied: revision %d", st.Rev())
	}
	if code, body := post(strings.NewReader(docs(200))); code != http.StatusOK || !strings.Contains(body, `"changed_count": 200`) {
		t.Errorf("the batch: %d %.300s", code, body)
	}
	srv.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.Verify(path); err != nil {
		t.Errorf("Verify: %v", err)
	}
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bbolt.Tx) error {
		if k, _ := tx.Bucket([]byte("staging")).Cursor().First(); k != nil {
			t.Errorf("bodies prewritten for a batch refused are still there (step %x)", k)
		}
		return nil
	})
	db.Close()
	st, err = bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs, err := st.Changes(context.Background(), store.FromStart)
	if err != nil || cs.Rev != 1 || len(cs.Puts) != 200 {
		t.Errorf("stored: rev %d, %d variants, %v", cs.Rev, len(cs.Puts), err)
	}
}
