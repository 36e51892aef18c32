package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
)

// oldServer answers applies as a server older than client=auto did: it
// refuses client=auto before reading the batch, and applies anything
// else (dry_run unknown to it). It records the client= of each apply,
// and the body of those it applied.
type oldServer struct {
	mu      sync.Mutex
	clients []string
	bodies  []string
}

func (o *oldServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := r.URL.Query().Get("client")
	o.mu.Lock()
	defer o.mu.Unlock()
	o.clients = append(o.clients, c)
	w.Header().Set("Content-Type", "application/json")
	if c == "auto" {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(admin.ErrorBody{Message: `client=auto: unknown client "auto": want envoy or grpc`})
		return
	}
	body, _ := io.ReadAll(r.Body)
	o.bodies = append(o.bodies, string(body))
	w.Header().Set("Server-Timing", "commit;dur=2.5")
	json.NewEncoder(w).Encode(admin.ApplyResult{Revision: 7, Changed: []string{"Cluster ok"}, Deleted: []string{}, ChangedCount: 1})
}

// A newer xdsd apply talking to a server that refuses client=auto falls
// back to what it sent before (client=envoy) and says so: a file is sent
// again; standard input, which cannot be, is preceded by a question the
// old server refuses without storing anything. A dry run is never sent
// to a server that would apply it.
func TestApplyFallsBackForOldServer(t *testing.T) {
	old := &oldServer{}
	srv := httptest.NewServer(old)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	f := writeFile(t, t.TempDir(), "c.yaml", okCluster)
	const note = "the server is older than --client auto (it refused client=auto): checking for Envoy, as xdsd apply did before"

	code, out, errOut := runCmd(t, "apply", "--admin", addr, "-f", f)
	if code != 0 || !strings.HasPrefix(out, "revision 7:") || !strings.Contains(errOut, note) {
		t.Errorf("file: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Join(old.clients, ",") != "auto,envoy" || len(old.bodies) != 1 || old.bodies[0] != okCluster {
		t.Errorf("file: the server saw client=%v and bodies %q", old.clients, old.bodies)
	}

	old.clients, old.bodies = nil, nil
	stdin, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	saved := os.Stdin
	os.Stdin = stdin
	code, out, errOut = runCmd(t, "apply", "--admin", addr, "-f", "-")
	os.Stdin = saved
	if code != 0 || !strings.HasPrefix(out, "revision 7:") || !strings.Contains(errOut, note) {
		t.Errorf("stdin: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Join(old.clients, ",") != "auto,envoy" || len(old.bodies) != 1 || !strings.Contains(old.bodies[0], okCluster) {
		t.Errorf("stdin: the server saw client=%v and bodies %q", old.clients, old.bodies)
	}

	// --timing times the request that was answered, the second.
	old.clients, old.bodies = nil, nil
	code, _, errOut = runCmd(t, "apply", "--admin", addr, "--timing", "-f", f)
	if code != 0 || !strings.Contains(errOut, " (server: commit=2.5) ") {
		t.Errorf("--timing: exit %d, stderr %q: want the answered request's server phases", code, errOut)
	}

	for _, args := range [][]string{{"--dry-run"}, {"--dry-run", "--client", "envoy"}, {"--dry-run", "--client", "none"}} {
		old.clients, old.bodies = nil, nil
		code, _, errOut = runCmd(t, append([]string{"apply", "--admin", addr, "-f", f}, args...)...)
		if code != 1 || !strings.Contains(errOut, "is older than --dry-run (it refuses client=auto): nothing was sent") || len(old.bodies) != 0 {
			t.Errorf("%v: exit %d %s; the server applied %q", args, code, errOut, old.bodies)
		}
	}
}

// apply --dry-run shows, for each group, what the batch would change for
// it, stores nothing, and exits as apply would.
func TestApplyDryRun(t *testing.T) {
	_, adm := startServe(t)
	dir := t.TempDir()
	if code, out, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "base.yaml", tp2Batch)); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	fleet := writeFile(t, dir, "fleet.yaml", "clients:\n- {agent: grpc-go, params: {env: prod, version: v1}}\n- {agent: envoy, params: {env: test}}\n")
	// v1 now routes to c-default: prod/v1 clients lose c-v1's route.
	change := writeFile(t, dir, "change.yaml", strings.Replace(tp2Batch, "cluster: c-v1}", "cluster: c-default}", 1))
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--fleet", fleet, "--dry-run", "-f", change)
	for _, want := range []string{
		"dry run against revision 1: 8 variants; nothing was stored",
		"group grpc-go {env=prod, version=v1} (declared)\n",
		"  keeps route tp2 [env=prod && version=v1]\n",
		"  loses cluster c-v1\n  loses endpoints c-v1\n",
		"group envoy {env=test} (declared)\n",
		"the apply would go ahead",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	// One that apply refuses exits 1 and names what refuses it.
	bad := writeFile(t, dir, "bad.yaml", strings.Replace(tp2Batch, "cluster: c-v1}", "cluster: c-gone}", 1))
	code, out, errOut = runCmd(t, "apply", "--admin", adm, "--fleet", fleet, "--dry-run", "-f", bad)
	if code != 1 || !strings.Contains(out, "  refuses: ") || !strings.Contains(out, "declared grpc-go clients with env=prod, version=v1 would wait for cluster c-gone") ||
		!strings.Contains(errOut, "1 problem(s) the connected or declared clients would reject or wait for in vain") {
		t.Errorf("refused dry run: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, _ := runCmd(t, "apply", "--admin", adm, "--fleet", fleet, "--dry-run", "--force", "-f", bad); code != 0 {
		t.Errorf("forced dry run: exit %d", code)
	}
	if l := listResources(t, adm, ""); l.Revision != 1 {
		t.Errorf("a dry run changed the store: revision %d", l.Revision)
	}
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--dry-run", "--wait", "-f", bad); code != 2 || !strings.Contains(errOut, "no rollout for --wait") {
		t.Errorf("--dry-run --wait: exit %d %s", code, errOut)
	}
}
