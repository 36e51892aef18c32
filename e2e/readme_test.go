package e2e

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// readmeBlock returns the part of the README between <!-- name --> and
// <!-- /name -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- "+name+" -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /"+name+" -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s block", name)
	}
	return block
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
func startBackground(t *testing.T, c, dir string, env []string, hc *http.Client, readyURL string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimSuffix(c, "&"))
	cmd.Dir, cmd.Env = dir, env
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	waitReady(t, hc, readyURL, exited, logs)
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
// becomes ready before the next command).
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
	for _, c := range cmds {
		if strings.HasSuffix(c, "&") {
			startBackground(t, c, root, env, http.DefaultClient, "http://127.0.0.1:18001/readyz")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", c)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README command %q: %v\n%s", c, err, out)
		}
		t.Logf("$ %s\n%s", c, out)
	}
}

// waitReady polls a readiness endpoint until it answers 200, failing if
// the process exits first or after a deadline.
func waitReady(t *testing.T, hc *http.Client, url string, exited <-chan error, logs *lockedBuffer) {
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
		case err := <-exited:
			t.Fatalf("the server exited (%v):\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready at %s:\n%s", url, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling readiness: no event to wait on
	}
}
