package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
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

// A record edited in etcd behind xdsd's back (issue 27 point 10): the
// running replica's background check (--verify-interval) finds it, and
// /readyz says degraded, naming the etcd key and the repair, while the
// replica serves what it loaded; a replica starting refuses, saying the
// same; `xdsd restore` into the damaged etcd works without the key being
// deleted by hand, and the running replica then serves the backup's state
// and is no longer degraded.
func TestEtcdDamageWhileRunningAndRestore(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("damaged")
	_, adm := startServe(t, "--store", url, "--verify-interval", "50ms")
	dir := t.TempDir()
	for _, tag := range []string{"tag-in-the-backup", "tag-after-the-backup"} {
		if tag == "tag-after-the-backup" {
			if code, _, errOut := runCmd(t, "backup", "--admin", adm, filepath.Join(dir, "b.db")); code != 0 {
				t.Fatal(errOut)
			}
		}
		if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f",
			writeFile(t, dir, "c.yaml", cl+"name: victim\nalt_stat_name: "+tag+"\n")); code != 0 {
			t.Fatal(errOut)
		}
	}
	cli := c.Client(t)
	r, err := cli.Get(context.Background(), "/damaged/r/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("%d records: %v", len(r.Kvs), err)
	}
	key := string(r.Kvs[0].Key)
	if _, err := cli.Put(context.Background(), key, "\xff\xffnot a record"); err != nil {
		t.Fatal(err)
	}

	repair := "xdsd restore --store " + url + " FILE"
	testutil.Eventually(t, "/readyz reports the damaged record", func() bool {
		code, body := httpGet(t, "http://"+adm+"/readyz")
		return code == 200 && strings.Contains(body, "degraded") && strings.Contains(body, strconv.Quote(key)) && strings.Contains(body, repair)
	})
	if _, body := httpGet(t, "http://"+adm+"/v1/resources"); !strings.Contains(body, "tag-after-the-backup") {
		t.Errorf("the replica no longer serves what it loaded: %.300s", body)
	}
	var ef etcdFlags
	if _, err := openStore(context.Background(), url, ef, 10, nil); err == nil || !strings.Contains(err.Error(), repair) {
		t.Errorf("a replica starting on the damaged store: %v, want %q", err, repair)
	}

	code, out, errOut := runCmd(t, "restore", "--store", url, filepath.Join(dir, "b.db"))
	if code != 0 {
		t.Fatalf("restore into the damaged etcd: exit %d: %s", code, errOut)
	}
	t.Log(strings.TrimSpace(out))
	if !strings.Contains(errOut, "damaged records replaced") || !strings.Contains(errOut, "victim") {
		t.Errorf("restore does not say it replaced the damaged record: %q", errOut)
	}
	testutil.Eventually(t, "the replica serves the backup's state, not degraded", func() bool {
		_, ready := httpGet(t, "http://"+adm+"/readyz")
		_, res := httpGet(t, "http://"+adm+"/v1/resources")
		return !strings.Contains(ready, "degraded") && strings.Contains(res, "tag-in-the-backup")
	})
	st, err := openStore(context.Background(), url, ef, 10, nil)
	if err != nil {
		t.Fatalf("a replica starting after the restore: %v", err)
	}
	st.Close()
}
