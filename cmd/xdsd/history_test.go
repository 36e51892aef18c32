package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
)

// history, diff and rollback: an operator sees who changed what, reads a
// change as a diff of the YAML, and puts an earlier state back as a new
// revision that clients then get.
func TestHistoryDiffRollback(t *testing.T) {
	xds, adm := startServe(t, "--history", "4")
	dir := t.TempDir()
	apply := func(body string) {
		t.Helper()
		if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", body)); code != 0 {
			t.Fatal(errOut)
		}
	}
	apply(cl + "name: a\nconnect_timeout: 1s\n---\n" + cl + "name: b\n")               // 1
	apply(cl + "name: a\nconnect_timeout: 2s\n---\n" + cl + "name: b\n")               // 2
	apply(cl + "name: a\nconnect_timeout: 2s\n---\n" + cl + "name: c\n")               // 3: b unchanged, c added
	if code, _, errOut := runCmd(t, "delete", "--admin", adm, "cds", "b"); code != 0 { // 4
		t.Fatal(errOut)
	}

	code, out, errOut := runCmd(t, "history", "--admin", adm)
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{"revision 4 ", "via delete", "deleted cds b", "revision 2 ", "updated cds a  (version 2)", "via apply", "created cds c  (version 3)", "from 127.0.0.1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("history lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "revision 4 "), strings.Index(out, "revision 2 "); i < 0 || j < i {
		t.Errorf("history is not newest first:\n%s", out)
	}
	// One resource's history, as JSON.
	code, out, errOut = runCmd(t, "history", "--admin", adm, "-o", "json", "cds", "a")
	var l store.RevisionList
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("history -o json cds a: %d %s %s", code, out, errOut)
	}
	if len(l.Revisions) != 2 || l.Revisions[0].Rev != 2 || l.Revisions[1].Rev != 1 || l.Rev != 4 {
		t.Errorf("history of cds a: %+v", l)
	}

	code, out, errOut = runCmd(t, "diff", "--admin", adm, "1", "2")
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{"changed cds a\n", "--- revision 1", "+++ revision 2", `-  connect_timeout: "1s"`, `+  connect_timeout: "2s"`, "-version: \"1\"", "+version: \"2\""} {
		if !strings.Contains(out, want) {
			t.Errorf("diff 1 2 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "cds b") {
		t.Errorf("diff 1 2 lists b, which did not change:\n%s", out)
	}
	code, out, _ = runCmd(t, "diff", "--admin", adm, "2", "4", "cds")
	if code != 0 || !strings.Contains(out, "removed cds b") || !strings.Contains(out, "added cds c") || strings.Contains(out, "cds a") {
		t.Errorf("diff 2 4 cds: %s", out)
	}

	// Roll back to revision 1: a changed back, b put back, c deleted.
	code, out, errOut = runCmd(t, "rollback", "--admin", adm, "1")
	if code != 0 {
		t.Fatal(errOut)
	}
	if !strings.Contains(out, "restored the state of revision 1 as revision 5") || !strings.Contains(out, "deleted envoy.config.cluster.v3.Cluster c") {
		t.Errorf("rollback: %s", out)
	}
	code, out, _ = runCmd(t, "diff", "--admin", adm, "1", "5")
	if code != 0 || !strings.Contains(out, "no difference between revisions 1 and 5") {
		t.Errorf("diff 1 5 after the rollback: %s", out)
	}
	// Clients get it.
	code, out, errOut = runCmd(t, "get", "--server", xds, "cds", "a")
	if code != 0 || !strings.Contains(out, `connect_timeout: "1s"`) || !strings.Contains(out, `version: "5"`) {
		t.Errorf("get cds a after the rollback: %d %s %s", code, out, errOut)
	}
	// The rollback is in the history; rolling back to where we are is a no-op.
	if code, out, _ = runCmd(t, "history", "--admin", adm, "--limit", "1"); code != 0 || !strings.Contains(out, "via rollback to 1") {
		t.Errorf("history after the rollback: %s", out)
	}
	if code, out, _ = runCmd(t, "rollback", "--admin", adm, "5"); code != 0 || !strings.Contains(out, "nothing to roll back") {
		t.Errorf("rollback to the current state: %s", out)
	}

	// --history 4: revision 0 is compacted (only revisions after 1 are kept); a
	// revision not reached is refused; bad arguments are usage errors.
	if code, _, errOut = runCmd(t, "diff", "--admin", adm, "0", "5"); code != 1 || !strings.Contains(errOut, "revision compacted") || !strings.Contains(errOut, "--history") {
		t.Errorf("diff from a compacted revision: %d %s", code, errOut)
	}
	if code, _, errOut = runCmd(t, "rollback", "--admin", adm, "99"); code != 1 || !strings.Contains(errOut, "no such revision: 99") {
		t.Errorf("rollback to a future revision: %d %s", code, errOut)
	}
	for _, args := range [][]string{{"diff", "1"}, {"diff", "x", "2"}, {"rollback"}, {"rollback", "-3"}, {"history", "cds", "a", "b"}, {"history", "nosuchtype"}, {"history", "-o", "xml"}} {
		if code, _, _ := runCmd(t, append(args, "--admin", adm)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
