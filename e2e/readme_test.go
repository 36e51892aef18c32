package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// readmeBlock returns the part of the README between <!-- name --> and
// <!-- /name -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	return docBlock(t, "README.md", name)
}

// walkthrough returns the commands of the README's first session: the
// sh block between <!-- walkthrough --> and <!-- /walkthrough -->.
func walkthrough(t *testing.T) []string {
	t.Helper()
	var cmds []string
	sc := bufio.NewScanner(strings.NewReader(readmeBlock(t, "walkthrough")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "```") || strings.HasPrefix(line, "#") {
			continue
		}
		cmds = append(cmds, line)
	}
	return cmds
}

// startBackground runs a README command that ends with & (a server) in
// dir, until the test ends, and waits until readyURL answers 200 through
// hc — as a person starts the next command once the server serves.
func startBackground(t *testing.T, c, dir string, env []string, hc *http.Client, readyURL string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimSuffix(c, "&"))
	cmd.Dir, cmd.Env = dir, env
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	// Closed once the process is gone: both the readiness wait and the
	// clean-up wait on it.
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	waitReady(t, hc, readyURL, exited, cmd, logs)
	return cmd
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The README's first session runs as shown, in the order shown, on this
// checkout: each command exits 0 (a server started with & stays up and
// becomes ready before the next command). The README's ports become free
// ones (freePorts): the test passes while another program holds 18000.
func TestREADMEWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cmds := walkthrough(t)
	if len(cmds) < 5 {
		t.Fatalf("walkthrough has %d commands", len(cmds))
	}
	bin := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	p := freePorts(t)
	for _, c := range cmds {
		run := p.command(c)
		if strings.HasSuffix(c, "&") {
			startBackground(t, run, root, env, http.DefaultClient, "http://"+p.addr(18001)+"/readyz")
			continue
		}
		runREADMECommand(t, c, run, root, env)
	}
}

// runREADMECommand runs command run (the README's command shown, adapted
// to the test) with bash in dir and fails the test unless it exits 0.
func runREADMECommand(t *testing.T, shown, run, dir string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", run)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README command %q: %v\n%s", shown, err, out)
	}
	t.Logf("$ %s\n%s", shown, out)
	return string(out)
}

// waitReady polls a readiness endpoint until it answers 200, failing if
// the process exits first or after a deadline.
func waitReady(t *testing.T, hc *http.Client, url string, exited <-chan struct{}, cmd *exec.Cmd, logs *lockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("the server exited (%v):\n%s", cmd.ProcessState, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready at %s:\n%s", url, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling readiness: no event to wait on
	}
}

// readmeCommands splits a README sh block into commands: continuation
// lines joined, a for … done loop kept whole, comments and fences
// dropped.
func readmeCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	loop := false
	for line := range strings.SplitSeq(block, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasPrefix(trimmed, "for ") {
			loop = true
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, `\`) || loop && trimmed != "done" {
			continue
		}
		loop = false
		cmds = append(cmds, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	return cmds
}

// The README's "Running replicas" commands run as shown: a 3-member etcd,
// two replicas on it (one watching examples/quickstart), an apply through
// the second, a relay in front of the first. Then what they promise holds:
// each replica serves what went in through the other, the relay serves it,
// and a client with the README's bootstrap gets it, also after
// the first replica is killed (it falls back to the second).
//
// The commands are taken from the README; only where they run is
// adapted: `go run ./cmd/xdsd` is the binary built for the tests, etcd is
// the one etcdtest builds, etcd's data directories are under the test's
// temporary directory, the README's ports are free ones (freePorts), and
// the commands end with the test.
func TestREADMEReplicas(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	etcdBin := etcdtest.Binary(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	adapt := strings.NewReplacer("go run ./cmd/xdsd", xdsdBin, "/tmp/", tmp+"/", "  etcd ", "  "+etcdBin+" ")
	p := freePorts(t)
	replicas, _ := runREADMEBlock(t, "replicas", adapt, p, root)
	if len(replicas) != 2 {
		t.Fatalf("the replicas block starts %d replicas, want 2", len(replicas))
	}

	get := func(args ...string) string {
		t.Helper()
		var stderr strings.Builder
		cmd := exec.Command(xdsdBin, append([]string{"get", "--timeout", "30s"}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("xdsd get %q: %v\n%s%s", args, err, out, stderr.String())
		}
		return string(out)
	}
	want := []string{"rds", "tp2", "--param", "env=prod", "--param", "version=v1"}
	// Applied through the second replica: the first serves it, the relay
	// in front of the first too.
	for _, server := range []string{p.addr(18000), p.addr(18010), p.addr(18100)} {
		if out := get(append([]string{"--server", server}, want...)...); !strings.Contains(out, "name: tp2") {
			t.Fatalf("%s does not serve route tp2 applied through the other replica:\n%s", server, out)
		}
	}
	// What the first replica's --watch loaded: the second serves it.
	if out := get("--server", p.addr(18010), "cds", "quickstart"); !strings.Contains(out, "name: quickstart") {
		t.Fatalf("the second replica does not serve cluster quickstart from the first's --watch:\n%s", out)
	}
	bs := filepath.Join(tmp, "bootstrap.json")
	block := readmeBlock(t, "replicas-bootstrap")
	block = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(block), "```json")), "```"))
	if err := os.WriteFile(bs, []byte(p.text(block)), 0o644); err != nil {
		t.Fatal(err)
	}
	viaBootstrap := get(append([]string{"--bootstrap", bs}, want...)...)
	// The first replica dies; a client with the bootstrap gets the same
	// from the second.
	replicas[0].Process.Kill()
	if after := get(append([]string{"--bootstrap", bs}, want...)...); after != viaBootstrap {
		t.Fatalf("with the first replica killed, the bootstrap's client got\n%s\nwant (as before)\n%s", after, viaBootstrap)
	}
}

// startGroup runs a README command that starts servers in the background
// (a loop of `... &`) in its own process group, killed when the test ends.
func startGroup(t *testing.T, c, dir string, env []string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", c+"\nwait")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
}

// waitHealthy polls an etcd /health endpoint until it reports healthy.
func waitHealthy(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd not healthy at %s", url)
		}
		time.Sleep(50 * time.Millisecond) // polling health: no event to wait on
	}
}

// runREADMEBlock runs the commands of a README sh block in order, each
// adapted by adapt and moved to the free ports p: a loop starting servers runs in its own process group;
// NAME=VALUE sets a variable for the commands after it (an etcd:// value
// is waited on until its members are healthy); a command ending in & is a
// server, waited on until its admin port's /readyz answers; any other
// command must exit 0. It returns the servers `xdsd serve` started, in
// order, and the output of the last command.
func runREADMEBlock(t *testing.T, name string, adapt *strings.Replacer, p *ports, root string) (serves []*exec.Cmd, last string) {
	t.Helper()
	cmds := readmeCommands(readmeBlock(t, name))
	if len(cmds) < 2 {
		t.Fatalf("the README's %s block has %d commands: %q", name, len(cmds), cmds)
	}
	env := os.Environ()
	for _, c := range cmds {
		run := adapt.Replace(p.command(c))
		switch {
		case strings.HasPrefix(c, "for "):
			startGroup(t, run, root, env)
		case strings.HasPrefix(c, "ETCD="):
			v := strings.TrimPrefix(run, "ETCD=")
			env = append(env, "ETCD="+v)
			hosts, _, _ := strings.Cut(strings.TrimPrefix(v, "etcd://"), "/")
			for h := range strings.SplitSeq(hosts, ",") {
				waitHealthy(t, "http://"+h+"/health")
			}
		case strings.HasSuffix(strings.TrimSpace(strings.Split(c, "#")[0]), "&"):
			run = strings.TrimSpace(strings.Split(run, "#")[0])
			// The admin address to wait on: p.command names it always.
			_, a, ok := strings.Cut(run, "--admin-addr ")
			if !ok {
				t.Fatalf("README command %q: no --admin-addr in %q", c, run)
			}
			addr, _, _ := strings.Cut(a, " ")
			if strings.HasPrefix(addr, ":") {
				addr = "127.0.0.1" + addr
			}
			cmd := startBackground(t, run, root, env, http.DefaultClient, "http://"+addr+"/readyz")
			if strings.Contains(c, " serve ") {
				serves = append(serves, cmd)
			}
		default:
			last = runREADMECommand(t, c, run, root, env)
		}
	}
	return serves, last
}

// The README's relay commands run as shown: a server, a relay in front of
// it, and a get through the relay that receives the TP2 variant.
func TestREADMERelay(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// In a scratch directory holding a copy of examples/ (--watch does not
	// follow a symlinked directory): the server's default store
	// (./xdsd.db) is the test's, not a file left in the checkout for the
	// next run to load.
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(root, "examples"))); err != nil {
		t.Fatal(err)
	}
	_, out := runREADMEBlock(t, "relay", strings.NewReplacer("go run ./cmd/xdsd", xdsdBin), freePorts(t), dir)
	if !strings.Contains(out, "name: tp2") || !strings.Contains(out, "env=prod") {
		t.Fatalf("the get through the relay did not print route tp2's env=prod variant:\n%s", out)
	}
}
