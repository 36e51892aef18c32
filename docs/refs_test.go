// Package docs holds xdsd's documentation. Its test checks that every
// reference to a document, in code comments and in the documents
// themselves, resolves inside the repository: the file exists and so does
// the cited section.
package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	refRE     = regexp.MustCompile(`docs/([a-z0-9-]+\.md)(?: §([0-9]+(?:\.[0-9]+)?))?`)
	outsideRE = regexp.MustCompile(`\.\./shared|(?:^|[^/a-z])(?:DESIGN|PROTOCOL|INTEROP)\.md|(?:^|[^/a-z])spec/[a-zA-Z0-9-]+\.(?:md|rst)`)
	h2RE      = regexp.MustCompile(`^## ([0-9]+)\. `)
	h3RE      = regexp.MustCompile(`^### ([0-9]+\.[0-9]+) `)
	itemRE    = regexp.MustCompile(`^([0-9]+)\. `)
)

// sections lists the sections a document defines: "N" for "## N. …",
// "N.M" for "### N.M …" and for the M-th top-level numbered item of
// section N.
func sections(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	cur := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := h2RE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			out[cur] = true
			continue
		}
		if strings.HasPrefix(line, "## ") {
			cur = ""
			continue
		}
		if m := h3RE.FindStringSubmatch(line); m != nil {
			out[m[1]] = true
			continue
		}
		if m := itemRE.FindStringSubmatch(line); m != nil && cur != "" {
			out[cur+"."+m[1]] = true
		}
	}
	return out
}

// trackedFiles lists the repository's files as git knows them.
func trackedFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	root = strings.TrimSpace(string(top))
	ls := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard")
	ls.Dir = root
	out, err := ls.Output()
	if err != nil {
		t.Fatal(err)
	}
	return root, strings.Fields(string(out))
}

func TestReferencesResolve(t *testing.T) {
	root, files := trackedFiles(t)
	secs := map[string]map[string]bool{}
	for _, f := range files {
		ext := filepath.Ext(f)
		if ext != ".go" && ext != ".md" && ext != ".yaml" && ext != ".json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree
			}
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if f != "docs/refs_test.go" && outsideRE.MatchString(line) {
				t.Errorf("%s:%d points outside the repository: %s", f, i+1, strings.TrimSpace(line))
			}
			for _, m := range refRE.FindAllStringSubmatch(line, -1) {
				doc := filepath.Join(root, "docs", m[1])
				if _, err := os.Stat(doc); err != nil {
					t.Errorf("%s:%d cites docs/%s, which does not exist", f, i+1, m[1])
					continue
				}
				if m[2] == "" {
					continue
				}
				if secs[m[1]] == nil {
					secs[m[1]] = sections(t, doc)
				}
				if !secs[m[1]][m[2]] {
					t.Errorf("%s:%d cites docs/%s §%s, which has no such section", f, i+1, m[1], m[2])
				}
			}
		}
	}
}
