package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

// A large batch goes from a file to the store as one revision, and the
// answer lists 100 of its variants and counts the rest; the same
// clusters, every one changed, replace it as the next revision.
// --max-batch-bytes refuses a larger body, naming itself. The memory an
// apply of 100,000 resources takes is held by TestApplyLargeBatchBudget,
// without the race detector, which changes what memory costs; here the
// batch need only be well past the 100 listed, and 2,000 clusters are
// (20,000 took minutes under -race on a busy machine and proved nothing
// more).
func TestApplyLargeBatch(t *testing.T) {
	const n = 2000
	file := filepath.Join(t.TempDir(), "mesh.json")
	size := writeClusters(t, file, n)

	_, small := startServe(t, "--max-batch-bytes", fmt.Sprint(size/2))
	code, _, errOut := runCmd(t, "apply", "--admin", small, "--client", "none", "-f", file)
	if code != 1 || !strings.Contains(errOut, "--max-batch-bytes") || !strings.Contains(errOut, "nothing was applied") {
		t.Errorf("apply over --max-batch-bytes: exit %d\n%s", code, errOut)
	}

	_, adm := startServe(t)
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("revision 1: %d variants changed", n)) {
		t.Fatalf("apply: exit %d\n%.300s\n%s", code, out, errOut)
	}
	// The answer names 100 of them (?list=100) and counts the rest.
	if listed := strings.Count(out, "\n  changed "); listed != maxListed || !strings.HasSuffix(out, fmt.Sprintf("\n  ... and %d more\n", n-maxListed)) {
		t.Errorf("apply listed %d variants, want %d and the rest counted:\n%.300s ... %s", listed, maxListed, out, out[max(0, len(out)-100):])
	}
	changeClusters(t, file, n)
	code, out, errOut = runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("revision 2: %d variants changed", n)) {
		t.Fatalf("second apply: exit %d\n%.300s\n%s", code, out, errOut)
	}
}

// writeClusters writes n Istio-like clusters to file as JSON and returns
// its size.
func writeClusters(t *testing.T, file string, n int) uint64 {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := meshgen.Clusters(f, n); err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.Size())
}

// changeClusters rewrites the n clusters of file, every one changed.
func changeClusters(t *testing.T, file string, n int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.ReplaceAll(b, []byte(`"connect_timeout":"10s"`), []byte(`"connect_timeout":"11s"`))
	if bytes.Count(changed, []byte(`"connect_timeout":"11s"`)) != n {
		t.Fatalf("the generated clusters no longer have connect_timeout 10s: change the test")
	}
	if err := os.WriteFile(file, changed, 0o644); err != nil {
		t.Fatal(err)
	}
}
