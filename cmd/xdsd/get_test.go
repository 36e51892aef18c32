package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/inspect"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

func TestGet(t *testing.T) {
	xds, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", "../../examples"); code != 0 {
		t.Fatal(errOut)
	}
	for _, delta := range []string{"--delta=false", "--delta"} {
		code, out, errOut := runCmd(t, "get", "--server", xds, delta, "--param", "env=prod", "-o", "json", "rds", "tp2", "quickstart")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", delta, code, errOut)
		}
		var rs []inspect.Result
		if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 {
			t.Fatalf("%s: %v\n%s", delta, err, out)
		}
		// One version story: each variant's own version, on both
		// transports (over SotW xdsd's client takes resources wrapped, with
		// their version) — the same the admin API shows.
		want := store.Version(1, constraint.MustParse("env=prod && version!=v1").Key())
		if rs[0].Name != "tp2" || rs[0].Constraints != "env=prod && version!=v1" || rs[0].Version != want || rs[1].Name != "quickstart" || rs[1].Constraints != "" {
			t.Errorf("%s: %+v", delta, rs)
		}
	}
	// A name that does not exist is shown as such, with exit status 1.
	// (Over delta, where the server says so. Over SotW a client infers it
	// from a full-state response, which cannot be told apart from the
	// answer to an earlier request when the names went out in two
	// requests — then get reports no-answer; known, to be fixed in the
	// client.)
	code, out, _ := runCmd(t, "get", "--server", xds, "--delta", "--timeout", "10s", "cds", "quickstart", "nope")
	if code != 1 || !strings.Contains(out, "status: does-not-exist") || !strings.Contains(out, "name: quickstart") {
		t.Errorf("exit %d\n%s", code, out)
	}
	// A glob, over delta.
	code, out, errOut := runCmd(t, "get", "--server", xds, "lds", "xdstp://quickstart.xdsd/envoy.config.listener.v3.Listener/*")
	if code != 0 || !strings.Contains(out, "xdstp://quickstart.xdsd/envoy.config.listener.v3.Listener/quickstart") {
		t.Errorf("glob: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"get", "cds"}, {"get", "-o", "xml", "cds", "a"}, {"get", "--param", "novalue", "cds", "a"}, {"watch", "nosuchtype", "a"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// watch prints every update and removal with a timestamp until
// interrupted.
func TestWatch(t *testing.T) {
	xds, adm := startServe(t)
	apply := func(doc string) {
		t.Helper()
		resp, err := httpPost("http://"+adm+"/v1/apply", doc)
		if err != nil || resp != 200 {
			t.Fatalf("apply: %d %v", resp, err)
		}
	}
	apply(cl + "name: w\nalt_stat_name: one\n")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	typ, _ := resource.Lookup("cds")
	go func() {
		done <- watch(ctx, &getFlags{Config: inspect.Config{Cmd: "watch", Server: xds, Timeout: 5 * time.Second}, output: "json"}, typ, []string{"w"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() inspect.Result {
		t.Helper()
		got := make(chan inspect.Result, 1)
		go func() {
			var r inspect.Result
			if lines.Scan() {
				json.Unmarshal(lines.Bytes(), &r)
			}
			got <- r
		}()
		select {
		case r := <-got:
			return r
		case <-time.After(testutil.Wait):
			t.Fatal("no output")
		}
		return inspect.Result{}
	}
	r := next()
	if r.Event != "updated" || r.Time == "" || !strings.Contains(string(r.Resource.Resource), "one") {
		t.Fatalf("first: %+v", r)
	}
	apply(cl + "name: w\nalt_stat_name: two\n")
	if r := next(); r.Event != "updated" || !strings.Contains(string(r.Resource.Resource), "two") {
		t.Fatalf("second: %+v", r)
	}
	// Another cluster changes: over SotW the response carries w again,
	// unchanged, and watch prints nothing for it; w's own next change is
	// the next line.
	apply(cl + "name: other\n")
	apply(cl + "name: w\nalt_stat_name: three\n")
	if r := next(); r.Event != "updated" || !strings.Contains(string(r.Resource.Resource), "three") {
		t.Fatalf("after another cluster changed, watch printed %+v; want w's change to three", r)
	}
	if code, _, _ := runCmd(t, "delete", "--admin", adm, "cds", "w"); code != 0 {
		t.Fatal("delete failed")
	}
	if r := next(); r.Event != "removed" || r.Status != "does-not-exist" {
		t.Fatalf("third: %+v", r)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// examples/vhds, as its README shows it: on-demand virtual hosts resolved
// by domain, and a host nothing matches reported as not existing.
func TestGetVHDS(t *testing.T) {
	xds, _ := startServe(t, "--watch", "../../examples/vhds")
	code, out, errOut := runCmd(t, "get", "--server", xds, "--delta", "--timeout", "10s", "-o", "json", "vhds",
		"shop/www.shop.example", "shop/eu.shop.example", "shop/api.internal", "shop/nowhere.org")
	if code != 1 {
		t.Fatalf("exit %d (want 1: one host does not exist): %s", code, errOut)
	}
	var rs []inspect.Result
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 4 {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, want := range []string{"shop/www", "shop/regional", "shop/api", ""} {
		var got struct{ Name string }
		if len(rs[i].Resource.Resource) > 0 {
			if err := json.Unmarshal(rs[i].Resource.Resource, &got); err != nil {
				t.Fatal(err)
			}
		}
		if got.Name != want {
			t.Errorf("%s: virtual host %q, want %q", rs[i].Name, got.Name, want)
		}
	}
	if rs[3].Status != "does-not-exist" {
		t.Errorf("%s: status %q", rs[3].Name, rs[3].Status)
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A server that cannot be reached is an error naming it (exit 1), at
// --timeout — not a does-not-exist after it.
func TestGetUnreachableServer(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	code, out, errOut := runCmd(t, "get", "--server", addr, "--timeout", "500ms", "cds", "x")
	el := time.Since(start)
	if code != 1 || !strings.Contains(errOut, "xdsd get: cannot reach xDS server "+addr+": ") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if strings.Contains(out, "does-not-exist") {
		t.Errorf("an unreachable server's resource printed as not existing:\n%s", out)
	}
	if el > 2*time.Second {
		t.Errorf("took %v with --timeout 500ms", el)
	}
}

// -o json prints what resources hold as it is ("&&", not "\u0026\u0026").
func TestGetJSONIsNotHTMLEscaped(t *testing.T) {
	xds, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", "../../examples"); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCmd(t, "get", "--server", xds, "--param", "env=prod", "-o", "json", "rds", "tp2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"env=prod && version!=v1"`) || strings.Contains(out, `\u0026`) {
		t.Errorf("output:\n%s", out)
	}
}

// The bootstrap get and watch build: the node id the help states; the
// transport from --delta, else SotW for --server and each server's own in
// a bootstrap (authorities' servers included); the environment's bootstrap
// when neither --server nor --bootstrap is given.
func TestGetBootstrap(t *testing.T) {
	typ, _ := resource.Lookup("cds")
	dir := t.TempDir()
	file := writeFile(t, dir, "bootstrap.json", `{
  "xds_servers": [{"server_uri": "top:1", "channel_creds": [{"type": "insecure"}], "transport": "sotw"}],
  "authorities": {"auth": {"xds_servers": [{"server_uri": "auth:1", "channel_creds": [{"type": "insecure"}]}]}}
}`)
	for _, tc := range []struct {
		args          []string
		env           map[string]string
		top, auth, id string
	}{
		{args: nil, top: "127.0.0.1:18000/sotw", id: "xdsd-get"},
		{args: []string{"--delta"}, top: "127.0.0.1:18000/delta", id: "xdsd-get"},
		{args: []string{"--node-id", "me"}, top: "127.0.0.1:18000/sotw", id: "me"},
		{args: []string{"--bootstrap", file}, top: "top:1/sotw", auth: "auth:1/delta", id: "xdsd-get"},
		{args: []string{"--bootstrap", file, "--delta=false"}, top: "top:1/sotw", auth: "auth:1/sotw", id: "xdsd-get"},
		{args: []string{"--bootstrap", file, "--delta"}, top: "top:1/delta", auth: "auth:1/delta", id: "xdsd-get"},
		{env: map[string]string{"GRPC_XDS_BOOTSTRAP": file}, top: "top:1/sotw", auth: "auth:1/delta", id: "xdsd-get"},
		{env: map[string]string{"GRPC_XDS_BOOTSTRAP_CONFIG": `{"xds_servers": [{"server_uri": "env:1", "channel_creds": [{"type": "insecure"}]}], "node": {"id": "env-node"}}`},
			top: "env:1/delta", id: "env-node"},
		{args: []string{"--server", "flag:1"}, env: map[string]string{"GRPC_XDS_BOOTSTRAP": file}, top: "flag:1/sotw", id: "xdsd-get"},
	} {
		t.Run(strings.Join(tc.args, " ")+fmt.Sprint(tc.env), func(t *testing.T) {
			t.Setenv("GRPC_XDS_BOOTSTRAP", "")
			t.Setenv("GRPC_XDS_BOOTSTRAP_CONFIG", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f, _, names, err := parseGet("get", append(tc.args, "cds", "xdstp://auth/envoy.config.cluster.v3.Cluster/x"), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			b, err := inspect.Bootstrap(&f.Config, typ, names)
			if err != nil {
				t.Fatal(err)
			}
			show := func(s []client.ServerConfig) string {
				if len(s) == 0 {
					return ""
				}
				tr := "delta"
				if !s[0].Delta() {
					tr = "sotw"
				}
				return s[0].URI + "/" + tr
			}
			var auth string
			if a := b.Authorities["auth"]; a != nil {
				auth = show(a.Servers)
			}
			if got := show(b.Servers); got != tc.top || auth != tc.auth || b.Node.GetId() != tc.id {
				t.Errorf("servers %s, authority's %q, node %q; want %s, %q, %q", got, auth, b.Node.GetId(), tc.top, tc.auth, tc.id)
			}
		})
	}
	_, help, _ := runCmd(t, "get", "-h")
	if !strings.Contains(help, "xdsd-get") || !strings.Contains(help, "GRPC_XDS_BOOTSTRAP") {
		t.Errorf("help:\n%s", help)
	}
}

// syncBuffer is a buffer written by one goroutine and read by another, that
// signals each write.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return s.b.Write(p)
}

func (s *syncBuffer) await(t *testing.T, substr string) {
	t.Helper()
	deadline := time.After(testutil.Wait)
	for {
		s.mu.Lock()
		got := s.b.String()
		s.mu.Unlock()
		if strings.Contains(got, substr) {
			return
		}
		select {
		case <-s.wrote:
		case <-deadline:
			t.Fatalf("no %q in:\n%s", substr, got)
		}
	}
}

// watch reports the connection's state on stderr: a server that cannot be
// reached, then the stream once it is up.
func TestWatchReportsConnectionState(t *testing.T) {
	addr := freeAddr(t)
	stderr := &syncBuffer{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	typ, _ := resource.Lookup("cds")
	go func() {
		done <- watch(ctx, &getFlags{Config: inspect.Config{Cmd: "watch", Server: addr, Timeout: 5 * time.Second}, output: "json"}, typ, []string{"w"}, io.Discard, stderr)
	}()
	stderr.await(t, `msg="xDS server unusable" server=`+addr)
	// And keeps saying so, naming the server, while it retries.
	stderr.await(t, "xdsd watch: cannot reach xDS server "+addr+": ")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A server that refuses connections fails get within a second or two,
// naming it, with nothing printed on stdout — not after --timeout.
func TestGetUnreachableFailsFast(t *testing.T) {
	addr := freeAddr(t)
	type outcome struct {
		code        int
		out, errOut string
	}
	done := make(chan outcome, 1)
	go func() {
		code, out, errOut := runCmd(t, "get", "--server", addr, "--timeout", "1h", "cds", "a")
		done <- outcome{code, out, errOut}
	}()
	select {
	case o := <-done:
		if o.code != 1 || o.out != "" || !strings.Contains(o.errOut, "cannot reach xDS server "+addr) {
			t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.out, o.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("get on a refused server is still waiting (it has --timeout 1h)")
	}
}

// String returns what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
