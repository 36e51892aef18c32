package e2e

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Every shell block of the documents a user follows (README.md, docs/*.md,
// examples/*/README.md) either runs in a test, on free ports, or says why
// it cannot. A block runs when it stands between <!-- NAME --> and
// <!-- /NAME --> and runs names NAME for its file; it says why not with
// <!-- not run: REASON --> just before it.
var runs = map[string]string{
	"README.md#quick-start":               "TestREADMEQuickStart",
	"README.md#walkthrough":               "TestREADMEWalkthrough",
	"README.md#relay":                     "TestREADMERelay",
	"README.md#securing":                  "TestREADMESecuring",
	"README.md#replicas":                  "TestREADMEReplicas",
	"examples/quickstart/README.md#run":   "TestExampleREADMEs",
	"examples/tp2-variants/README.md#run": "TestExampleREADMEs",
	"examples/vhds/README.md#run":         "TestExampleREADMEs",
	"examples/federation/README.md#run":   "TestExampleREADMEs",
}

// shellBlock is one fenced shell block of a document.
type shellBlock struct {
	file   string // relative to the repository's root
	line   int
	marker string // the innermost NAME of <!-- NAME --> … <!-- /NAME --> around it
	notRun string // the reason of a <!-- not run: REASON --> before it
}

var (
	markerOpenRE  = regexp.MustCompile(`^<!-- ([a-z0-9-]+) -->$`)
	markerCloseRE = regexp.MustCompile(`^<!-- /([a-z0-9-]+) -->$`)
	notRunRE      = regexp.MustCompile(`^<!-- not run: (.+) -->$`)
	shellFenceRE  = regexp.MustCompile("^```(sh|bash|shell|console)\\s*$")
)

// docFiles lists the documents whose commands a user runs.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, g := range []string{"docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join("..", g))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			files = append(files, strings.TrimPrefix(filepath.ToSlash(f), "../"))
		}
	}
	return files
}

// shellBlocks finds the shell blocks of a document and what marks them.
func shellBlocks(t *testing.T, file string) []shellBlock {
	t.Helper()
	f, err := os.Open(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []shellBlock
	var open []string
	notRun := ""
	inFence := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if inFence {
			inFence = !strings.HasPrefix(line, "```")
			continue
		}
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = true
			if shellFenceRE.MatchString(line) {
				b := shellBlock{file: file, line: n, notRun: notRun}
				if len(open) > 0 {
					b.marker = open[len(open)-1]
				}
				out = append(out, b)
			}
			notRun = ""
		case markerOpenRE.MatchString(line):
			open = append(open, markerOpenRE.FindStringSubmatch(line)[1])
		case markerCloseRE.MatchString(line):
			name := markerCloseRE.FindStringSubmatch(line)[1]
			if len(open) == 0 || open[len(open)-1] != name {
				t.Errorf("%s:%d: <!-- /%s --> closes no <!-- %s -->", file, n, name, name)
				continue
			}
			open = open[:len(open)-1]
		case notRunRE.MatchString(line):
			notRun = notRunRE.FindStringSubmatch(line)[1]
		case line != "" && !strings.HasPrefix(line, "<!--"):
			notRun = "" // a reason stands just before its block
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range open {
		t.Errorf("%s: <!-- %s --> is never closed", file, name)
	}
	return out
}

// Every documented shell block runs in a test or says why it cannot, and
// every test named for a block exists.
func TestEveryDocCommandRunsOrSaysWhyNot(t *testing.T) {
	used := map[string]bool{}
	n := 0
	for _, file := range docFiles(t) {
		for _, b := range shellBlocks(t, file) {
			n++
			switch {
			case b.notRun != "":
			case b.marker == "":
				t.Errorf("%s:%d: a shell block that runs in no test and says no reason: put it between <!-- NAME --> and <!-- /NAME --> and run it from a test (e2e/docs_test.go's runs), or put <!-- not run: REASON --> before it", b.file, b.line)
			case runs[b.file+"#"+b.marker] == "":
				t.Errorf("%s:%d: the block's marker %q names no test in e2e/docs_test.go's runs", b.file, b.line, b.marker)
			default:
				used[b.file+"#"+b.marker] = true
			}
		}
	}
	if n == 0 {
		t.Fatal("no shell block found: the documents moved?")
	}
	src := ""
	for _, f := range must(filepath.Glob("*_test.go")) {
		src += string(must(os.ReadFile(f)))
	}
	for key, test := range runs {
		if !used[key] {
			t.Errorf("runs names %s, which marks no shell block", key)
		}
		if !strings.Contains(src, "func "+test+"(t *testing.T)") {
			t.Errorf("runs names test %s for %s: no such test in e2e", test, key)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// docBlock returns the part of a document between <!-- name --> and
// <!-- /name -->.
func docBlock(t *testing.T, file, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- "+name+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("%s has no %s block", file, name)
	}
	return block
}

var fileMarkerRE = regexp.MustCompile(`<!-- file: ([A-Za-z0-9._-]+) -->\s*\n` + "```" + `[a-z]*\n((?s:.*?))` + "```")

// ran is one documented command, as run.
type ran struct {
	shown, out string
	code       int
}

// runDocCommands runs the shell commands of a marked part of a document
// in dir, on the free ports p: `go run ./cmd/xdsd` is the test's binary,
// a `serve` or `relay` (which run until stopped) is started in the
// background and waited on until it is ready, files shown after
// <!-- file: NAME --> are written first (ports rewritten), and any other
// command runs to its end. It returns what each command printed and its
// exit code, for the test to hold to what the document says.
func runDocCommands(t *testing.T, file, name string, p *ports, dir string) []ran {
	t.Helper()
	block := docBlock(t, file, name)
	for _, m := range fileMarkerRE.FindAllStringSubmatch(block, -1) {
		if err := os.WriteFile(filepath.Join(dir, m[1]), []byte(p.text(m[2])), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var cmds []string
	for _, m := range regexp.MustCompile("(?s)```(?:sh|bash|shell|console)\n(.*?)```").FindAllStringSubmatch(block, -1) {
		cmds = append(cmds, readmeCommands(m[1])...)
	}
	if len(cmds) == 0 {
		t.Fatalf("%s#%s: no commands", file, name)
	}
	env := os.Environ()
	adapt := strings.NewReplacer("go run ./cmd/xdsd", xdsdBin)
	var out []ran
	for _, c := range cmds {
		run := adapt.Replace(p.command(c))
		if sub := xdsdCommandRE.FindStringSubmatch(c); sub != nil && (sub[1] == "serve" || sub[1] == "relay") {
			run = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.Split(run, " #")[0]), "&"))
			_, a, ok := strings.Cut(run, "--admin-addr ")
			if !ok {
				t.Fatalf("%s: %q: no --admin-addr in %q", file, c, run)
			}
			addr, _, _ := strings.Cut(a, " ")
			startBackground(t, run+" &", dir, env, http.DefaultClient, "http://"+addr+"/readyz")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", run)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		cancel()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %q: %v", file, c, err)
		}
		t.Logf("$ %s\n%s", c, b)
		out = append(out, ran{shown: c, out: string(b), code: code})
	}
	return out
}

// scratch is a directory holding a copy of examples/, where documented
// commands run as from the repository's root without touching it.
func scratch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join("..", "examples"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The README's quick start: the command that runs the main job serves the
// quickstart example (it is stopped once it serves).
func TestREADMEQuickStart(t *testing.T) {
	runDocCommands(t, "README.md", "quick-start", freePorts(t), scratch(t))
}

// The examples' READMEs run as shown, and print what they say.
func TestExampleREADMEs(t *testing.T) {
	type check func(t *testing.T, rs []ran)
	last := func(want string, code int) check {
		return func(t *testing.T, rs []ran) {
			r := rs[len(rs)-1]
			if r.code != code || !strings.Contains(r.out, want) {
				t.Errorf("%q: exit %d, want %d and %q in\n%s", r.shown, r.code, code, want, r.out)
			}
		}
	}
	for _, tc := range []struct {
		file string
		// serve starts a server first, on the README's default ports: the
		// document says one is running.
		serve bool
		check check
	}{
		{"examples/quickstart/README.md", false, last("name: quickstart", 0)},
		{"examples/tp2-variants/README.md", true, func(t *testing.T, rs []ran) {
			if len(rs) != 3 || rs[0].code != 0 || !strings.Contains(rs[1].out, "env=prod && version=v1") ||
				!strings.Contains(rs[2].out, "env!=prod && version!=v1") {
				t.Errorf("apply, then the variants for env=prod,version=v1 and env=test: %+v", rs)
			}
		}},
		// One name does not exist: get prints it so and exits 1, as the
		// README says.
		{"examples/vhds/README.md", false, func(t *testing.T, rs []ran) {
			r := rs[len(rs)-1]
			for _, want := range []string{"name: shop/www.shop.example", "name: shop/www\n", "name: shop/regional", "name: shop/api\n",
				"name: shop/nowhere.org\nstatus: does-not-exist", "not every resource could be had"} {
				if !strings.Contains(r.out, want) {
					t.Errorf("get lacks %q:\n%s", want, r.out)
				}
			}
			if r.code != 1 {
				t.Errorf("get: exit %d, the README says 1", r.code)
			}
		}},
		{"examples/federation/README.md", false, last("name: xdstp://auth-b/envoy.config.cluster.v3.Cluster/svc", 0)},
	} {
		t.Run(filepath.Base(filepath.Dir(tc.file)), func(t *testing.T) {
			p := freePorts(t)
			dir := scratch(t)
			if tc.serve {
				startBackground(t, xdsdBin+" serve --store mem: --xds-addr "+p.addr(18000)+" --admin-addr "+p.addr(18001)+" &", dir,
					os.Environ(), http.DefaultClient, "http://"+p.addr(18001)+"/readyz")
			}
			tc.check(t, runDocCommands(t, tc.file, "run", p, dir))
		})
	}
}
