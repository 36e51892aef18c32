package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/xdsd/xdsd/internal/testutil"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/files"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// startServe runs `xdsd serve` in-process on loopback ports with a bolt
// store in a temp dir (extra may give "--store SPEC" and "--watch DIR"); it
// returns the bound addresses. The server stops when the test ends.
func startServe(t *testing.T, extra ...string) (xdsAddr, adminAddr string) {
	t.Helper()
	xdsAddr, adminAddr, _ = startStoppableServe(t, extra...)
	return xdsAddr, adminAddr
}

// startStoppableServe is startServe that also returns a function stopping
// the server, for tests that restart it.
func startStoppableServe(t *testing.T, extra ...string) (xdsAddr, adminAddr string, stop func()) {
	t.Helper()
	return startServeLogged(t, io.Discard, extra...)
}

// startServeLogged is startStoppableServe whose log (at info) goes to
// logTo, for tests that wait for what the server says.
func startServeLogged(t *testing.T, logTo io.Writer, extra ...string) (xdsAddr, adminAddr string, stop func()) {
	t.Helper()
	// The admin read timeout is the default's five times: under -race on
	// two busy cores a large test batch (20,000 clusters) took more
	// than the default 2 minutes to send, and what these tests measure is
	// not that timeout.
	f := serveFlags{daemonFlags: daemonFlags{xdsAddr: "127.0.0.1:0", adminAddr: "127.0.0.1:0", logLevel: "error",
		maxSubs: 1000, maxMsg: 4 << 20, rate: 1000, burst: 1000, adminReadTimeout: 5 * defaultAdminReadTimeout},
		storeSpec: "bolt:" + filepath.Join(t.TempDir(), "xdsd.db"), watchInterval: 50 * time.Millisecond,
		maxBatchBytes: admin.DefaultMaxBatchBytes, history: 1000}
	for i := 0; i+1 < len(extra); i += 2 {
		switch extra[i] {
		case "--watch":
			f.watchDir = extra[i+1]
		case "--store":
			f.storeSpec = extra[i+1]
		case "--etcd-cert":
			f.etcd.cert = extra[i+1]
		case "--etcd-key":
			f.etcd.key = extra[i+1]
		case "--etcd-ca":
			f.etcd.ca = extra[i+1]
		case "--etcd-user":
			f.etcd.user = extra[i+1]
		case "--etcd-password-file":
			f.etcd.passwordFile = extra[i+1]
		case "--history":
			n, err := strconv.Atoi(extra[i+1])
			if err != nil {
				t.Fatal(err)
			}
			f.history = n
		case "--max-batch-bytes":
			n, err := strconv.ParseInt(extra[i+1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			f.maxBatchBytes = n
		case "--tls-cert":
			f.tlsCert = extra[i+1]
		case "--tls-key":
			f.tlsKey = extra[i+1]
		case "--client-ca":
			f.clientCA = extra[i+1]
		case "--policy":
			f.policyFile = extra[i+1]
		case "--admin-token-file":
			f.tokenFile = extra[i+1]
		case "--admin-addr":
			f.adminAddr = extra[i+1]
		case "--admin-peer-ca":
			f.peers.ca = extra[i+1]
		case "--admin-peer-token-file":
			f.peers.tokenFile = extra[i+1]
		case "--admin-peer-cert":
			f.peers.cert = extra[i+1]
		case "--admin-peer-key":
			f.peers.key = extra[i+1]
		case "--admin-client-ca":
			f.adminClientCA = extra[i+1]
		case "--insecure-admin":
			f.insecureAdmin = extra[i+1] == "true"
		case "--verify-interval":
			d, err := time.ParseDuration(extra[i+1])
			if err != nil {
				t.Fatal(err)
			}
			f.verifyInterval = d
		default:
			t.Fatalf("startServe: unknown flag %s", extra[i])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	type addrs struct{ x, a string }
	up := make(chan addrs, 1)
	done := make(chan struct{}) // closed when serve has returned serveErr
	var serveErr error
	go func() {
		defer close(done)
		serveErr = serve(ctx, f, slog.New(slog.NewTextHandler(logTo, nil)), func(x, a string) { up <- addrs{x, a} })
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if serveErr != nil {
				t.Errorf("serve: %v", serveErr)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-up:
		return a.x, a.a, stop
	case <-done:
		t.Fatal("serve returned before it was ready") // stop reports its error
	case <-time.After(testutil.Wait):
		t.Fatal("serve did not start")
	}
	return "", "", nil
}

func listResources(t *testing.T, adminAddr, query string) admin.ResourceList {
	t.Helper()
	resp, err := http.Get("http://" + adminAddr + "/v1/resources" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l admin.ResourceList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	return l
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateExamples(t *testing.T) {
	code, out, errOut := runCmd(t, "validate", "-f", "../../examples")
	if code != 0 || !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

const cl = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"

// Each kind of bad input gets its own precise error, names the file, the
// document and the field, exits 1, and stores nothing.
var badInputs = []struct {
	name, src string
	want      []string
}{
	{"malformed name", cl + "name: \"xdstp://a/envoy.config.cluster.v3.Cluster/x%zz\"\n", []string{"bad.yaml:2:7: document 1: name:", "at byte 43", "percent-escape"}},
	{"bad constraint syntax", "constraints: env==prod\nresource:\n  " + cl + "  name: c\n", []string{"bad.yaml:1:14: document 1: constraints:", "at byte"}},
	{"overlapping variants", "constraints: env=prod || env=test\nresource:\n  " + cl + "  name: c\n---\nconstraints: env=qa || env=test\nresource:\n  " + cl + "  name: c\n", []string{"overlap", "both match {env=test}"}},
	{"different key sets", "constraints: env=prod\nresource:\n  " + cl + "  name: c\n---\nconstraints: env=test && version=v1\nresource:\n  " + cl + "  name: c\n", []string{"constrains [env] but", "[env, version]"}},
	{"payload fails ValidateAll", "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: vh\n  domains: []\n", []string{"bad.yaml:5:12: document 1: virtual_hosts[0].domains: value must contain at least 1 item(s)"}},
	{"name/payload mismatch", "name: a\nresource:\n  " + cl + "  name: b\n", []string{"resource.name:", `"b" differs from the resource name "a"`}},
}

func TestValidateBadInputs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range badInputs {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, dir, "bad.yaml", tc.src)
			code, out, errOut := runCmd(t, "validate", "-f", p)
			if code != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"validate"}, {"apply"}, {"delete", "cds"}, {"delete", "nosuchtype", "x"},
		{"serve", "--store", "floppy:"}, {"serve", "--log-level", "loud"}, {"validate", "--nope"},
	} {
		if code, _, errOut := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d (want 2): %s", args, code, errOut)
		}
	}
	if code, out, _ := runCmd(t, "serve", "-h"); code != 0 || !strings.Contains(out, "--watch") && !strings.Contains(out, "-watch") {
		t.Errorf("serve -h: exit %d\n%s", code, out)
	}
}

func TestServeApplyDelete(t *testing.T) {
	_, adm := startServe(t)
	docs, err := files.Load("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "-f", "../../examples")
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("revision 1: %d variants changed", len(docs))) {
		t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
	}
	// Applying the same again changes nothing.
	if code, out, _ := runCmd(t, "apply", "--admin", adm, "-f", "../../examples"); code != 0 || !strings.HasPrefix(out, "unchanged at revision 1") {
		t.Fatalf("re-apply: exit %d %s", code, out)
	}
	l := listResources(t, adm, "?type=rds&name=tp2")
	if len(l.Resources) != 4 || l.Resources[0].Constraints == "" || l.Resources[0].Version != store.Version(1, constraint.MustParse(l.Resources[0].Constraints).Key()) {
		t.Fatalf("resources: %+v", l)
	}

	dir := t.TempDir()
	for _, tc := range badInputs {
		p := writeFile(t, dir, "bad.yaml", tc.src)
		code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", p)
		if code != 1 || !strings.Contains(errOut, tc.want[0]) {
			t.Errorf("%s: exit %d\n%s", tc.name, code, errOut)
		}
	}
	if l := listResources(t, adm, ""); l.Revision != 1 {
		t.Fatalf("a bad apply changed the store: revision %d", l.Revision)
	}
	// The server refuses a bad batch whole, whatever the client checked.
	resp, err := http.Post("http://"+adm+"/v1/apply", "application/yaml", strings.NewReader(cl+"name: good\n---\n"+badInputs[0].src))
	if err != nil {
		t.Fatal(err)
	}
	var eb admin.ErrorBody
	json.NewDecoder(resp.Body).Decode(&eb)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || len(eb.Errors) != 1 || eb.Errors[0].Document != 2 || eb.Errors[0].Path != "name" {
		t.Fatalf("POST bad batch: %s %+v", resp.Status, eb)
	}
	if l := listResources(t, adm, "?name=good"); len(l.Resources) != 0 {
		t.Fatal("half of a bad batch was applied")
	}

	// Delete one variant, then the whole resource.
	code, out, errOut = runCmd(t, "delete", "--admin", adm, "rds", "tp2", "--constraints", "env=prod && version=v1")
	if code != 0 || !strings.Contains(out, "1 variant deleted") {
		t.Fatalf("delete variant: exit %d %s%s", code, out, errOut)
	}
	if l := listResources(t, adm, "?type=rds&name=tp2"); len(l.Resources) != 3 {
		t.Fatalf("after deleting a variant: %d left", len(l.Resources))
	}
	if code, out, _ := runCmd(t, "delete", "--admin", adm, "envoy.config.route.v3.RouteConfiguration", "tp2"); code != 0 || !strings.Contains(out, "3 variants deleted") {
		t.Fatalf("delete all: exit %d %s", code, out)
	}
	if code, _, errOut := runCmd(t, "delete", "--admin", adm, "rds", "tp2"); code != 1 || !strings.Contains(errOut, "no such resource") {
		t.Fatalf("delete missing: exit %d %s", code, errOut)
	}
}

func TestServeWatchDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", cl+"name: a\n")
	_, adm := startServe(t, "--watch", dir)
	if l := listResources(t, adm, "?name=a"); len(l.Resources) != 1 {
		t.Fatalf("watched dir not applied at start: %+v", l)
	}
}

// The README's quickstart setup (serve --watch DIR on a bolt store): a file
// removed while the server is down deletes, at the next start, what it
// defined, and only that.
func TestServeWatchDirRestart(t *testing.T) {
	dir, db := t.TempDir(), "bolt:"+filepath.Join(t.TempDir(), "xdsd.db")
	writeFile(t, dir, "a.yaml", cl+"name: a\n")
	writeFile(t, dir, "b.yaml", cl+"name: b\n")
	other := writeFile(t, t.TempDir(), "other.yaml", cl+"name: applied\n")
	_, adm, stop := startStoppableServe(t, "--store", db, "--watch", dir)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", other); code != 0 {
		t.Fatal(errOut)
	}
	if l := listResources(t, adm, ""); len(l.Resources) != 3 {
		t.Fatalf("before the restart: %+v", l)
	}
	stop()

	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	_, adm = startServe(t, "--store", db, "--watch", dir)
	l := listResources(t, adm, "")
	var got []string
	for _, r := range l.Resources {
		got = append(got, r.Name)
	}
	if strings.Join(got, " ") != "a applied" || l.Revision != 3 {
		t.Fatalf("after removing b.yaml while down: revision %d, %v; want a and applied at revision 3", l.Revision, got)
	}
}

func httpPost(url, body string) (int, error) {
	resp, err := http.Post(url, "application/yaml", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A daemon whose address is taken says which listener failed, exits 1, and
// leaves nothing running (goleak checks) — for serve and relay alike.
func TestBusyAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	path := filepath.Join(t.TempDir(), "xdsd.db")
	db := "bolt:" + path
	watch := t.TempDir()
	writeFile(t, watch, "a.yaml", cl+"name: a\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", db, "--xds-addr", addr}, "xDS listener"},
		{[]string{"serve", "--store", db, "--xds-addr", "127.0.0.1:0", "--admin-addr", addr}, "admin listener"},
		{[]string{"serve", "--store", db, "--watch", watch, "--xds-addr", addr}, "xDS listener"},
		{[]string{"serve", "--store", db, "--watch", watch, "--xds-addr", "127.0.0.1:0", "--admin-addr", addr}, "admin listener"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--xds-addr", addr}, "xDS listener"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--xds-addr", "127.0.0.1:0", "--admin-addr", addr}, "admin listener"},
	} {
		code, _, errOut := runCmd(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "address already in use") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and %q", c.args, code, errOut, c.want)
		}
	}
	// A server that could not start left the store as it was: the watched
	// directory was never applied.
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := origin.OwnershipKey(watch)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := st.Meta(context.Background(), key); st.Rev() != 0 || rec != nil || err != nil {
		t.Errorf("failed starts changed the store: revision %d, record of %s %q (%v)", st.Rev(), watch, rec, err)
	}
}

// A watched directory that cannot be applied stops the start with the
// directory named, after the listeners were bound, and frees them.
func TestServeWatchBadDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "bad.yaml", cl+"name: a\nbogus: 1\n")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	code, _, errOut := runCmd(t, "serve", "--store", "mem:", "--watch", dir, "--xds-addr", addr, "--admin-addr", "")
	if code != 1 || !strings.Contains(errOut, "--watch "+dir) || !strings.Contains(errOut, "bad.yaml") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// The listener was released: the address can be bound again.
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listener left bound after a failed start: %v", err)
	}
	lis.Close()
}

// An apply answers once its revision is served: a client asking right
// after `xdsd apply` returns gets what was applied, never an older state.
func TestApplyIsServedWhenItReturns(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	for i := range 10 {
		p := writeFile(t, dir, "c.yaml", fmt.Sprintf("%sname: ryw\nalt_stat_name: gen-%d\n", cl, i))
		if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", p); code != 0 {
			t.Fatal(errOut)
		}
		code, out, errOut := runCmd(t, "get", "--server", xds, "cds", "ryw")
		if code != 0 || !strings.Contains(out, fmt.Sprintf("gen-%d", i)) {
			t.Fatalf("after apply %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
}

// The health endpoints: alive, and ready once the store is served; the
// metrics endpoint exposes the server's metrics.
func TestHealthAndMetrics(t *testing.T) {
	_, adm := startServe(t)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": "xdsd_apply_to_send_seconds",
		"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
		resp, err := http.Get("http://" + adm + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("%s: %s %q", path, resp.Status, body)
		}
	}
}

// --log-format json writes one JSON object per line; an unknown format is
// bad usage.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("info", "json", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("xdsd serving", "xds", "127.0.0.1:1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "xdsd serving" || line["xds"] != "127.0.0.1:1" {
		t.Fatalf("json log line %q: %v", buf.String(), err)
	}
	for _, args := range [][]string{{"serve", "--store", "mem:"}, {"relay", "--upstream", "127.0.0.1:1"}} {
		if code, _, stderr := runCmd(t, append(args, "--log-format", "xml")...); code != 2 || !strings.Contains(stderr, "--log-format") {
			t.Errorf("%s --log-format xml: exit %d, %q", args[0], code, stderr)
		}
	}
}

// A --watch edit that fails to apply keeps the last good state served and
// is visible: /readyz says "degraded" with the reason, the metrics count
// it; a fixed edit clears it.
func TestServeWatchFailureIsVisible(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", cl+"name: a\n")
	_, adm := startServe(t, "--watch", dir)
	readyz := func() string {
		_, body := httpGet(t, "http://"+adm+"/readyz")
		return body
	}
	writeFile(t, dir, "a.yaml", cl+"name: a\nbogus: 1\n")
	testutil.Eventually(t, "the failed edit shows in /readyz", func() bool { return strings.HasPrefix(readyz(), "degraded: --watch "+dir) })
	if body := readyz(); !strings.Contains(body, "a.yaml") {
		t.Errorf("/readyz does not name the file: %q", body)
	}
	_, m := httpGet(t, "http://"+adm+"/metrics")
	if !strings.Contains(m, "xdsd_watch_failing 1") || !strings.Contains(m, "xdsd_watch_apply_failures_total") {
		t.Errorf("metrics lack the failure:\n%s", m)
	}
	if l := listResources(t, adm, "?name=a"); len(l.Resources) != 1 {
		t.Errorf("the last good state is not served: %+v", l)
	}
	writeFile(t, dir, "a.yaml", cl+"name: a\n# fixed\n")
	testutil.Eventually(t, "the fixed edit clears /readyz", func() bool { return readyz() == "ok\n" })
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Deleting a resource that a file of the --watch directory defines is
// refused, naming the file (the directory would still define it); --force
// deletes it anyway. A resource applied through the API is not guarded.
func TestDeleteOfAWatchedResource(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "a.yaml", cl+"name: a\n")
	_, adm := startServe(t, "--watch", dir)
	if code, _, _ := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, t.TempDir(), "b.yaml", cl+"name: b\n")); code != 0 {
		t.Fatal("apply b")
	}
	code, _, errOut := runCmd(t, "delete", "--admin", adm, "cds", "a")
	if code != 1 || !strings.Contains(errOut, file) || !strings.Contains(errOut, "--force") {
		t.Fatalf("delete of a watched resource: exit %d, %q", code, errOut)
	}
	if l := listResources(t, adm, "?name=a"); len(l.Resources) != 1 {
		t.Fatalf("refused delete deleted it: %+v", l)
	}
	if code, _, errOut := runCmd(t, "delete", "--admin", adm, "cds", "b"); code != 0 {
		t.Fatalf("delete of an applied resource: %s", errOut)
	}
	if code, _, errOut := runCmd(t, "delete", "--admin", adm, "--force", "cds", "a"); code != 0 {
		t.Fatalf("delete --force: %s", errOut)
	}
	if l := listResources(t, adm, "?name=a"); len(l.Resources) != 0 {
		t.Fatalf("forced delete left it: %+v", l)
	}
}

// Applying a resource that a file of the --watch directory defines is
// refused like deleting it, naming the file and --force: the directory's
// next change would replace it. A new variant of it is refused too (the
// directory replaces the whole variant set), a batch that touches nothing
// watched goes through, and --force applies anyway.
func TestApplyOfAWatchedResource(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "a.yaml", cl+"name: a\n")
	_, adm := startServe(t, "--watch", dir)
	testutil.Eventually(t, "the watched directory applied", func() bool { return len(listResources(t, adm, "?name=a").Resources) == 1 })
	over := writeFile(t, t.TempDir(), "a2.yaml", cl+"name: a\nconnect_timeout: 7s\n---\n"+cl+"name: c\n")
	code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", over)
	if code != 1 || !strings.Contains(errOut, file) || !strings.Contains(errOut, "--force") || !strings.Contains(errOut, "Cluster a in "+file) {
		t.Fatalf("apply over a watched resource: exit %d, %q", code, errOut)
	}
	if l := listResources(t, adm, "?name=c"); len(l.Resources) != 0 {
		t.Fatalf("a refused batch was half applied: %+v", l)
	}
	variant := writeFile(t, t.TempDir(), "a3.yaml", "name: a\nconstraints: env=test\nresource:\n  "+cl+"  name: a\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", variant); code != 1 || !strings.Contains(errOut, file) {
		t.Fatalf("a new variant of a watched resource: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", writeFile(t, t.TempDir(), "b.yaml", cl+"name: b\n")); code != 0 {
		t.Fatalf("apply of an unwatched resource: %s", errOut)
	}
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "--force", "-f", over); code != 0 {
		t.Fatalf("apply --force: %s", errOut)
	}
	if l := listResources(t, adm, "?name=c"); len(l.Resources) != 1 {
		t.Fatalf("forced apply: %+v", l)
	}
}

// serve refuses a damaged store — an existing empty file, a record whose
// bytes changed on disk — exiting 1 with an error naming the file, rather
// than starting empty (every full-state client would delete everything) or
// serving altered data.
func TestServeRefusesADamagedStore(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(dir, "flipped.db")
	st, err := bolt.Open(flipped, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := resource.Decode("c.yaml", []byte(cl+"name: a-cluster-named-distinctly\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{docs[0].Variant}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	data, err := os.ReadFile(flipped)
	if err != nil {
		t.Fatal(err)
	}
	// Change the cluster's name inside its stored payload (the key keeps
	// the name: only the record's checksum can tell).
	i := bytes.LastIndex(data, []byte("a-cluster-named-distinctly"))
	if i < 0 {
		t.Fatal("payload not found in the file")
	}
	data[i] = 'b'
	if err := os.WriteFile(flipped, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{{empty, "empty"}, {flipped, "checksum"}} {
		code, _, errOut := runCmd(t, "serve", "--store", "bolt:"+c.path, "--xds-addr", "127.0.0.1:0", "--admin-addr", "")
		if code != 1 || !strings.Contains(errOut, c.path) || !strings.Contains(errOut, c.want) {
			t.Errorf("serve on %s: exit %d, %q", filepath.Base(c.path), code, errOut)
		}
	}
}
