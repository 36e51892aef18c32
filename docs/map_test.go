package docs

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

var mapCellRE = regexp.MustCompile("`([a-z0-9/._-]+)`")

// TestPackageMap holds docs/architecture.md §3 to the tree: every package
// of the module is listed in its table, and every package the table lists
// exists. A row may name several packages, and "P/..." covers P's tree.
func TestPackageMap(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "## 3. ")
	end := strings.Index(text, "## 4. ")
	if start < 0 || end < start {
		t.Fatal("architecture.md: no section 3 before section 4")
	}
	listed := map[string]bool{}
	var trees []string
	for line := range strings.SplitSeq(text[start:end], "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range mapCellRE.FindAllStringSubmatch(first, -1) {
			if p, ok := strings.CutSuffix(m[1], "/..."); ok {
				trees = append(trees, p)
				continue
			}
			listed[m[1]] = true
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", "github.com/xdsd/xdsd/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exists := map[string]bool{}
	for _, imp := range strings.Fields(string(out)) {
		p := strings.TrimPrefix(strings.TrimPrefix(imp, "github.com/xdsd/xdsd"), "/")
		exists[p] = true
		if listed[p] {
			continue
		}
		covered := false
		for _, tr := range trees {
			if p == tr || strings.HasPrefix(p, tr+"/") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("package %s is not in docs/architecture.md §3's table: add a row saying what it owns", p)
		}
	}
	for p := range listed {
		if !exists[p] {
			t.Errorf("docs/architecture.md §3 lists %s, which is not a package of the module: remove or rename the row", p)
		}
	}
}
