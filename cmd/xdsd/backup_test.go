package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// backup copies a running server's store while applies go on, and the
// copy holds exactly the revision it says; restore, offline, puts it back:
// the restarted server serves that revision's resources and versions.
// A damaged backup is refused, and so is a restore under a running server.
func TestBackupAndRestore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "xdsd.db")
	_, adm, stop := startStoppableServe(t, "--store", "bolt:"+db)
	for i := 1; i <= 3; i++ {
		if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", cl+"name: a\nalt_stat_name: v"+string(rune('0'+i))+"\n")); code != 0 {
			t.Fatal(errOut)
		}
	}
	// Applies keep going while the backup is taken.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, t.TempDir(), "b.yaml", cl+"name: busy\nalt_stat_name: b"+strings.Repeat("x", i)+"\n"))
		}
	}()
	backup := filepath.Join(dir, "backup.db")
	code, out, errOut := runCmd(t, "backup", "--admin", adm, backup)
	wg.Wait()
	if code != 0 || !strings.Contains(out, "written to "+backup) || !strings.Contains(out, "verified") {
		t.Fatalf("backup: %d %s %s", code, out, errOut)
	}
	var rev string
	if _, err := fmtSscan(out, &rev); err != nil {
		t.Fatalf("backup output %q: %v", out, err)
	}
	// Later changes, then the restore must bring back the backup's state.
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", cl+"name: a\nalt_stat_name: after-backup\n")); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut = runCmd(t, "restore", "--store", "bolt:"+db, backup); code != 1 || !strings.Contains(errOut, "in use by another process: stop the server first") {
		t.Errorf("restore under a running server: %d %s", code, errOut)
	}
	stop()

	damaged := filepath.Join(dir, "damaged.db")
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runCmd(t, "restore", "--store", "bolt:"+db, damaged); code != 1 || !strings.Contains(errOut, "the backup is not usable") {
		t.Errorf("restore of a damaged backup: %d %s", code, errOut)
	}
	code, out, errOut = runCmd(t, "restore", "--store", "bolt:"+db, backup)
	if code != 0 || !strings.Contains(out, "restored revision "+rev+" into "+db) || !strings.Contains(out, "kept as "+db+".replaced-") {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	xds, adm, _ := startStoppableServe(t, "--store", "bolt:"+db)
	code, out, errOut = runCmd(t, "get", "--server", xds, "cds", "a")
	if code != 0 || !strings.Contains(out, "alt_stat_name: v3") || !strings.Contains(out, `version: "3"`) {
		t.Errorf("after the restore, cds a: %d %s %s", code, out, errOut)
	}
	if code, out, _ = runCmd(t, "history", "--admin", adm, "--limit", "1"); code != 0 || !strings.Contains(out, "revision "+rev+" ") {
		t.Errorf("after the restore, the newest revision is not %s: %s", rev, out)
	}
	// mem: stores have nothing to back up.
	_, admMem := startServe(t, "--store", "mem:")
	if code, _, errOut = runCmd(t, "backup", "--admin", admMem, filepath.Join(dir, "mem.db")); code != 1 || !strings.Contains(errOut, "cannot be backed up") {
		t.Errorf("backup of mem: %d %s", code, errOut)
	}
}

// fmtSscan reads the revision from "backup of revision N written to …".
func fmtSscan(out string, rev *string) (int, error) {
	return fmt.Sscanf(out, "backup of revision %s written", rev)
}

// On etcd: a backup is the state at one revision, exported as a store
// file (verified like bolt's); restore applies it back as one batch, the
// replicas serving it as a new revision.
func TestBackupAndRestoreOnEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("backup")
	xds, adm := startServe(t, "--store", url)
	dir := t.TempDir()
	apply := func(body string) {
		t.Helper()
		if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", body)); code != 0 {
			t.Fatal(errOut)
		}
	}
	apply(cl + "name: a\nalt_stat_name: before\n---\n" + cl + "name: b\n")
	backup := filepath.Join(dir, "etcd-backup.db")
	code, out, errOut := runCmd(t, "backup", "--admin", adm, backup)
	if code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("backup on etcd: %d %s %s", code, out, errOut)
	}
	var rev string
	if _, err := fmtSscan(out, &rev); err != nil {
		t.Fatal(err)
	}
	apply(cl + "name: a\nalt_stat_name: after\n---\n" + cl + "name: c\n")
	code, out, errOut = runCmd(t, "restore", "--store", url, backup)
	if code != 0 || !strings.Contains(out, "restored the state of revision "+rev+" into "+url) || !strings.Contains(out, "1 variant changed, 1 variant deleted") {
		t.Fatalf("restore into etcd: %d %s %s", code, out, errOut)
	}
	// The running replica serves the restored state.
	testutil.Eventually(t, "the replica serves the restored a and no c", func() bool {
		_, outA, _ := runCmd(t, "get", "--server", xds, "--delta", "--timeout", "3s", "cds", "a", "c")
		return strings.Contains(outA, "alt_stat_name: before") && strings.Contains(outA, "status: does-not-exist")
	})
}
