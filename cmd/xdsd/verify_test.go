package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil"
)

// Pages of a live bolt file overwritten behind the server's back: the
// background check (--verify-interval) finds the damage while the server
// runs and /readyz says so with the file, and GET /v1/backup refuses
// (500, naming the damage) rather than answer 200 with a damaged copy.
func TestDamageFoundWhileRunning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	_, adm := startServe(t, "--store", "bolt:"+path, "--verify-interval", "50ms")
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f",
		writeFile(t, t.TempDir(), "c.yaml", cl+"name: a-cluster-named-distinctly\n")); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	if code, body := httpGet(t, "http://"+adm+"/v1/backup"); code != 200 || len(body) == 0 {
		t.Fatalf("backup of a sound store: %d", code)
	}
	if code, body := httpGet(t, "http://"+adm+"/readyz"); code != 200 || strings.Contains(body, "degraded") {
		t.Fatalf("readyz before the damage: %d %q", code, body)
	}

	// Change the cluster's name inside its stored payload, in place (the
	// file is mapped shared, so the server sees it).
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndex(data, []byte("a-cluster-named-distinctly"))
	if i < 0 {
		t.Fatal("payload not found in the file")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("b"), int64(i)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	testutil.Eventually(t, "/readyz reports the damage", func() bool {
		_, body := httpGet(t, "http://"+adm+"/readyz")
		return strings.Contains(body, "degraded") && strings.Contains(body, path) && strings.Contains(body, "damaged")
	})
	code, body := httpGet(t, "http://"+adm+"/v1/backup")
	if code != 500 || !strings.Contains(body, "damaged") {
		t.Errorf("backup of a damaged store: %d %.300q", code, body)
	}
	if code, _, errOut := runCmd(t, "backup", "--admin", adm, filepath.Join(t.TempDir(), "b.db")); code == 0 || !strings.Contains(errOut, "damaged") {
		t.Errorf("xdsd backup of a damaged store: exit %d, %q", code, errOut)
	}
}
