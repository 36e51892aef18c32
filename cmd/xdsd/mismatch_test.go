package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil"

	"google.golang.org/grpc"
)

// probe tells the ports a user mixes up apart by what they answer: an
// HTTPS server (with or without asking for a client certificate), a plain
// HTTP/1 server, a plaintext gRPC server, and a closed port.
func TestProbe(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	plain := httptest.NewServer(h)
	defer plain.Close()
	secure := httptest.NewTLSServer(h)
	defer secure.Close()
	mtls := httptest.NewUnstartedServer(h)
	mtls.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	mtls.StartTLS()
	defer mtls.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	go g.Serve(lis)
	defer g.Stop()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, addr string
		want       speaks
	}{
		{"http", plain.Listener.Addr().String(), speaksHTTP1},
		{"https", secure.Listener.Addr().String(), speaksTLS},
		{"https asking for a client certificate", mtls.Listener.Addr().String(), speaksTLS},
		{"grpc", lis.Addr().String(), speaksHTTP2},
		{"closed", closedAddr, speaksUnknown},
	} {
		if got := probe(tc.addr); got != tc.want {
			t.Errorf("%s: probe says %d, want %d", tc.name, got, tc.want)
		}
	}
	if h := xdsMismatch(secure.Listener.Addr().String()); !strings.Contains(h, "serves TLS") || !strings.Contains(h, "--bootstrap") {
		t.Errorf("xDS at a TLS port: %q", h)
	}
	if h := xdsMismatch(plain.Listener.Addr().String()); !strings.Contains(h, "--xds-addr") {
		t.Errorf("xDS at the admin port: %q", h)
	}
	if h := adminMismatch(secure.Listener.Addr().String(), false); !strings.Contains(h, "https://") {
		t.Errorf("http admin request at HTTPS: %q", h)
	}
	if h := adminMismatch(lis.Addr().String(), false); !strings.Contains(h, "--admin-addr") {
		t.Errorf("admin request at the xDS port: %q", h)
	}
	if h := xdsMismatch(lis.Addr().String()); h != "" {
		t.Errorf("a gRPC port is what xDS wants: %q", h)
	}
}

// The mix-ups a user makes, against a real xdsd serve: each error names
// the likely mistake and the flag that fixes it.
//   - get --server at a TLS xDS port;
//   - get at the admin port;
//   - status at the xDS port;
//   - status over http:// at an HTTPS admin API.
func TestMismatchHints(t *testing.T) {
	s := startSecure(t) // TLS on both ports
	code, _, errOut := runCmd(t, "get", "--server", s.xds, "--timeout", "20s", "cds", "x")

	if code != 1 || !strings.Contains(errOut, "serves TLS") || !strings.Contains(errOut, "--bootstrap") {
		t.Errorf("get at a TLS xDS port: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCmd(t, "status", "--admin", s.adm)

	if code != 1 || !strings.Contains(errOut, "serves HTTPS") || !strings.Contains(errOut, "https://"+s.adm) {
		t.Errorf("status over http at an HTTPS admin: exit %d\n%s", code, errOut)
	}

	xds, adm := startServe(t) // plaintext
	code, _, errOut = runCmd(t, "get", "--server", adm, "--timeout", "20s", "cds", "x")

	if code != 1 || !strings.Contains(errOut, "answers HTTP/1") || !strings.Contains(errOut, "--xds-addr") {
		t.Errorf("get at the admin port: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCmd(t, "status", "--admin", xds)

	if code != 1 || !strings.Contains(errOut, "--admin-addr") {
		t.Errorf("status at the xDS port: exit %d\n%s", code, errOut)
	}
}

// A taken port names the flag that sets it; a bolt store in a directory
// that does not exist says so, not that the store is damaged.
func TestServeStartErrorsNameTheFix(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--store", "mem:", "--xds-addr", taken, "--admin-addr", "127.0.0.1:0"}, "set by --xds-addr"},
		{[]string{"serve", "--store", "mem:", "--xds-addr", "127.0.0.1:0", "--admin-addr", taken}, "set by --admin-addr"},
		{[]string{"serve", "--store", "bolt:" + t.TempDir() + "/no/such/dir/x.db", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, "does not exist: create it (mkdir -p"},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "restore a backup") {
			t.Errorf("%v: exit %d\n%s", tc.args, code, errOut)
		}
	}
}

// serve left to its default ports on a machine where another process
// holds them (held here by the test, or by whatever holds them already)
// serves on free ports instead and says so; the ports given with a flag
// are never replaced (TestServeStartErrorsNameTheFix).
func TestDefaultPortsTakenServeOnFreeOnes(t *testing.T) {
	for _, a := range []string{"127.0.0.1:18000", "127.0.0.1:18001"} {
		if l, err := net.Listen("tcp", a); err == nil {
			defer l.Close()
		}
	}
	var logs lockedLog
	f := serveFlags{daemonFlags: daemonFlags{xdsAddr: "127.0.0.1:18000", adminAddr: "127.0.0.1:18001", xdsDefault: true, adminDefault: true,
		logLevel: "error", maxSubs: 1000, maxMsg: 4 << 20, rate: 1000, burst: 1000},
		storeSpec: "mem:", watchInterval: 50 * time.Millisecond, maxBatchBytes: 1 << 20, history: 10}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, f, slog.New(slog.NewTextHandler(&logs, nil)), func(x, a string) { up <- [2]string{x, a} })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	var addrs [2]string
	select {
	case addrs = <-up:
	case err := <-done:
		t.Fatalf("serve on taken default ports: %v", err)
	case <-time.After(testutil.Wait):
		t.Fatal("serve never became ready")
	}
	if strings.HasSuffix(addrs[0], ":18000") || strings.HasSuffix(addrs[1], ":18001") {
		t.Fatalf("serve took the held ports: %v", addrs)
	}
	if code, body := httpGet(t, "http://"+addrs[1]+"/readyz"); code != 200 {
		t.Errorf("readyz on %s: %d %s", addrs[1], code, body)
	}
	for _, want := range []string{"127.0.0.1:18000 is taken by another process: xDS listens on " + addrs[0], "give --xds-addr to choose",
		"127.0.0.1:18001 is taken by another process: the admin API listens on " + addrs[1]} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// lockedLog collects a logger's output while the test may read it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
