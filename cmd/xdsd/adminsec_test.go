package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// serveLogged runs serve with f's security and limit flags on loopback
// ports and a bolt store in a temp dir, logging into the returned buffer;
// the server stops when the test ends.
func serveLogged(t *testing.T, f serveFlags) (xds, adm string, logs *syncBuffer) {
	t.Helper()
	if f.xdsAddr == "" {
		f.xdsAddr = "127.0.0.1:0"
	}
	if f.adminAddr == "" {
		f.adminAddr = "127.0.0.1:0"
	}
	f.maxSubs, f.maxMsg, f.rate, f.burst = 1000, 4<<20, 1000, 1000
	f.storeSpec = "bolt:" + filepath.Join(t.TempDir(), "xdsd.db")
	f.maxBatchBytes, f.history, f.watchInterval = admin.DefaultMaxBatchBytes, 1000, 50*time.Millisecond
	logs = &syncBuffer{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	type addrs struct{ x, a string }
	up := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, f, slog.New(slog.NewTextHandler(logs, nil)), func(x, a string) { up <- addrs{x, a} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case a := <-up:
		return a.x, a.a, logs
	case err := <-done:
		done <- err
		t.Fatalf("serve returned before it was ready: %v", err)
	case <-time.After(testutil.Wait):
		t.Fatal("serve did not start")
	}
	return "", "", nil
}

// adminDo sends method path to the admin API at addr naming host in its
// Host header, with the extra headers, and returns the status and body.
func adminDo(t *testing.T, c *http.Client, scheme, addr, host, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, scheme+"://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Issue 27 point 1: a page on a DNS-rebinding domain (evil.example
// resolving to 127.0.0.1) is same-origin with the admin API in the
// browser's eyes. The admin API without credentials answers it 421, for
// writes and reads (the backup holds every private key), and logs the
// host; names of this server, and --admin-host names, are answered.
func TestAdminRefusesRebindingHosts(t *testing.T) {
	var f serveFlags
	f.adminHosts = hostFlags{"xdsd.internal.example"}
	_, adm, logs := serveLogged(t, f)
	port := adm[strings.LastIndex(adm, ":")+1:]
	evil := "evil.example:" + port
	doc := cl + "name: rebound\n"

	// The request, as a browser on the rebound page sends it.
	code, body := adminDo(t, httpClient, "http", adm, evil, http.MethodPost, "/v1/apply", doc,
		"Origin", "http://"+evil, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/yaml")
	if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--admin-host") {
		t.Fatalf("rebound apply: %d %s, want 421 naming --admin-host", code, body)
	}
	logs.await(t, "host="+evil)
	for _, path := range []string{"/v1/resources", "/v1/backup", "/v1/clients", "/debug/pprof/", "/"} {
		if code, body := adminDo(t, httpClient, "http", adm, evil, http.MethodGet, path, ""); code != http.StatusMisdirectedRequest {
			t.Errorf("rebound GET %s: %d %.200s, want 421", path, code, body)
		}
	}
	if code, body := adminDo(t, httpClient, "http", adm, adm, http.MethodGet, "/v1/resources", ""); code != http.StatusOK || strings.Contains(body, "rebound") {
		t.Fatalf("the rebound apply was stored: %d %s", code, body)
	}
	// Probes answer whatever the Host (load balancers name it freely).
	if code, _ := adminDo(t, httpClient, "http", adm, evil, http.MethodGet, "/readyz", ""); code != http.StatusOK {
		t.Errorf("/readyz with another Host: %d", code)
	}
	// This server's names: its address, localhost, an --admin-host name.
	for _, host := range []string{adm, "localhost:" + port, "LOCALHOST.", "127.0.0.2:" + port, "[::1]:" + port, "xdsd.internal.example:" + port} {
		if code, body := adminDo(t, httpClient, "http", adm, host, http.MethodGet, "/v1/resources", ""); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	if code, body := adminDo(t, httpClient, "http", adm, "localhost:"+port, http.MethodPost, "/v1/apply", doc, "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Errorf("apply naming localhost: %d %s", code, body)
	}
	// CrossOriginProtection still refuses a cross-site browser write.
	if code, body := adminDo(t, httpClient, "http", adm, adm, http.MethodPost, "/v1/apply", doc,
		"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/yaml"); code != http.StatusForbidden {
		t.Errorf("cross-site apply: %d %s, want 403", code, body)
	}
}

// An admin API that asks for credentials answers any Host: a rebound page
// has none to present.
func TestCredentialedAdminAnswersAnyHost(t *testing.T) {
	s := startSecure(t)
	tok, err := os.ReadFile(s.writeTok)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost"}}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	if code, body := adminDo(t, hc, "https", s.adm, "admin.example.org", http.MethodGet, "/v1/resources", "",
		"Authorization", "Bearer "+strings.TrimSpace(string(tok))); code != http.StatusOK {
		t.Errorf("a credentialed read naming another Host: %d %s", code, body)
	}
	if code, _ := adminDo(t, hc, "https", s.adm, "evil.example", http.MethodGet, "/v1/resources", ""); code != http.StatusUnauthorized {
		t.Errorf("a read without credentials: %d, want 401", code)
	}
}

// The warning of a secured xDS port beside an open admin API.
func TestOpenAdminBesideSecuredXDSWarns(t *testing.T) {
	var f serveFlags
	f.policyFile = writeFile(t, t.TempDir(), "policy.yaml", "rules:\n- names: [\"*\"]\n")
	_, _, logs := serveLogged(t, f)
	logs.await(t, "any local process can read every secret and change the configuration")
}

// certClient is an https client of the admin API presenting leaf's
// certificate (none if nil).
func certClient(t *testing.T, ca *testpki.CA, leaf *testpki.Leaf) *http.Client {
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if leaf != nil {
		cfg.Certificates = []tls.Certificate{leaf.TLS}
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// Issue 27 point 7: a workload certificate read, over the admin API, a
// resource the policy denies it over xDS, the clients and the profiler.
// Certificates are admin credentials only when the policy gives their
// identity an admin role, or when --admin-client-ca signs them.
func TestAdminCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, adminCA := testpki.NewCA(t, "workload CA"), testpki.NewCA(t, "admin CA")
	server := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	adminCAFile := writeFile(t, dir, "admin-ca.crt", string(adminCA.PEM))
	tokens := writeFile(t, dir, "tokens", "wwwwwwwwwwwwwwwwwwwwwwww write ci\n")
	const viewerID, deployID = "spiffe://example.org/ns/ops/sa/viewer", "spiffe://example.org/ns/ops/sa/deploy"
	secured := func(policyText, adminCAFile string) serveFlags {
		var f serveFlags
		f.tlsCert, f.tlsKey, f.clientCA, f.tokenFile = server.Cert, server.Key, server.CA, tokens
		f.policyFile, f.adminClientCA = writeFile(t, t.TempDir(), "policy.yaml", policyText), adminCAFile
		return f
	}
	docs := cl + "name: prod-a\n"
	workload := ca.Leaf(t, testpki.LeafOpts{URI: testID})

	// The attack, against a policy without admin roles: refused, and the
	// change of behaviour is logged at start.
	_, adm, logs := serveLogged(t, secured(testPolicy, ""))
	logs.await(t, "certificates signed by --client-ca are no longer admin credentials")
	for _, path := range []string{"/v1/resources?type=cds&name=prod-a", "/v1/clients", "/debug/pprof/", "/v1/audit"} {
		if code, body := adminDo(t, certClient(t, ca, workload), "https", adm, adm, http.MethodGet, path, ""); code != http.StatusUnauthorized || !strings.Contains(body, testID) {
			t.Errorf("GET %s with a workload certificate: %d %.200s, want 401 naming the identity", path, code, body)
		}
	}

	// Admin roles from the policy, and an admin CA.
	xds, adm, logs := serveLogged(t, secured(testPolicy+`- clients: ["`+viewerID+`"]
  admin: read
- clients: ["`+deployID+`"]
  admin: write
`, adminCAFile))
	viewer, deployer := ca.Leaf(t, testpki.LeafOpts{URI: viewerID}), ca.Leaf(t, testpki.LeafOpts{URI: deployID})
	operator := adminCA.Leaf(t, testpki.LeafOpts{}) // no URI SAN: named by its CN
	if code, body := adminDo(t, certClient(t, ca, workload), "https", adm, adm, http.MethodGet, "/v1/resources", ""); code != http.StatusUnauthorized {
		t.Errorf("a workload without an admin role: %d %s", code, body)
	}
	if code, body := adminDo(t, certClient(t, ca, viewer), "https", adm, adm, http.MethodGet, "/v1/resources", ""); code != http.StatusOK {
		t.Errorf("admin: read reads: %d %s", code, body)
	}
	if code, body := adminDo(t, certClient(t, ca, viewer), "https", adm, adm, http.MethodPost, "/v1/apply", docs, "Content-Type", "application/yaml"); code != http.StatusForbidden || !strings.Contains(body, viewerID+" may read but not write") {
		t.Errorf("admin: read applies: %d %s, want 403", code, body)
	}
	if code, body := adminDo(t, certClient(t, ca, deployer), "https", adm, adm, http.MethodPost, "/v1/apply", docs, "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Errorf("admin: write applies: %d %s", code, body)
	}
	if code, body := adminDo(t, certClient(t, ca, operator), "https", adm, adm, http.MethodDelete, "/v1/resources?type=cds&name=prod-a", ""); code != http.StatusOK {
		t.Errorf("an --admin-client-ca certificate deletes: %d %s", code, body)
	}
	code, body := adminDo(t, certClient(t, ca, viewer), "https", adm, adm, http.MethodGet, "/v1/audit", "")
	if code != http.StatusOK || !strings.Contains(body, `"who": "`+deployID+`"`) || !strings.Contains(body, `"who": "CN=xdsd test leaf"`) {
		t.Errorf("the audit does not name the certificates' holders: %d %s", code, body)
	}
	// The admin CA is no xDS credential.
	err := streamErr(t, (&secure{xds: xds, ca: ca}).conn(t, operator), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"prod-a"}})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("an admin certificate on the xDS port: %v, want UNAVAILABLE (the handshake refused)", err)
	}
	if strings.Contains(logs.String(), "no longer admin credentials") {
		t.Errorf("the change of behaviour was logged with admin roles configured")
	}

	// One CA for both would make every workload an admin.
	f := secured(testPolicy, server.CA)
	f.xdsAddr, f.adminAddr, f.storeSpec = "127.0.0.1:0", "127.0.0.1:0", "mem:"
	if err := serve(context.Background(), f, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "every workload certificate would be an admin") {
		t.Errorf("--admin-client-ca equal to --client-ca: %v", err)
	}
}

// dialFrom opens a TCP connection to addr from the loopback address src
// (127.0.0.0/8 is all this host's: one source per address).
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports how long the server took to close c (reading
// nothing), failing past max.
func closedWithin(t *testing.T, c net.Conn, max time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(max))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not close an idle connection within %v: %v", max, err)
	}
	return time.Since(start)
}

// probeFrom asks path from the loopback address src over a fresh
// connection: its status, or 0 if the connection was closed unanswered.
func probeFrom(t *testing.T, src, addr, path string) int {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Issue 27 point 2: idle TCP connections, with no TLS handshake and no
// request, filled --admin-max-connections and /healthz failed. Now one
// source holds at most --admin-max-connections-per-source, a connection
// that sends no headers is closed after 2 s, and a reserve past the cap
// answers the probes.
func TestAdminLockout(t *testing.T) {
	var f serveFlags
	f.adminMaxConns = 32
	_, adm, _ := serveLogged(t, f)

	// One source: 256 idle connections; it keeps 16, the rest are closed.
	var held []net.Conn
	for range 256 {
		held = append(held, dialFrom(t, "127.0.0.2", adm))
	}
	if code := probeFrom(t, "127.0.0.9", adm, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz from another source while one holds 256 connections: %d", code)
	}
	closedEarly := 0
	for _, c := range held[defaultAdminPerSource:] {
		c.SetReadDeadline(time.Now().Add(time.Second)) // well under the header timeout
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closedEarly++
		}
	}
	if closedEarly != 256-defaultAdminPerSource {
		t.Errorf("%d connections over the per-source cap were closed at once, want %d", closedEarly, 256-defaultAdminPerSource)
	}
	// The ones it keeps are closed once the header timeout passes.
	if d := closedWithin(t, held[0], 10*time.Second); d > 2*adminHeaderTimeout {
		t.Errorf("an idle connection was closed after %v, want about %v", d, adminHeaderTimeout)
	}

	// Many sources fill the cap: the reserve still answers the probes,
	// and only them. (The attack's connections live 2 s: on a slow
	// machine it tries again.)
	for attempt := 0; ; attempt++ {
		var conns []net.Conn
		for i := range 32 {
			conns = append(conns, dialFrom(t, fmt.Sprintf("127.0.%d.%d", attempt+1, i/defaultAdminPerSource+1), adm))
		}
		full := probeFrom(t, "127.0.0.9", adm, "/v1/resources") == http.StatusServiceUnavailable
		health, ready := probeFrom(t, "127.0.0.9", adm, "/healthz"), probeFrom(t, "127.0.0.9", adm, "/readyz")
		for _, c := range conns {
			c.Close()
		}
		if !full {
			if attempt == 20 {
				t.Fatal("32 connections never filled a cap of 32")
			}
			continue
		}
		if health != http.StatusOK || ready != http.StatusOK {
			t.Errorf("at the cap: /healthz %d, /readyz %d, want 200 from the reserve", health, ready)
		}
		break
	}
	// Once the idle connections time out, the API answers again.
	testutil.Eventually(t, "the slots are free again", func() bool { return probeFrom(t, "127.0.0.9", adm, "/v1/resources") == http.StatusOK })
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// What one idle admin connection costs the server (issue 27 point 2):
// memory while it is held, and for how long it holds a slot.
func TestAdminConnectionCost(t *testing.T) {
	var f serveFlags
	f.adminMaxConns, f.adminPerSource = 1000, 1000
	_, adm, _ := serveLogged(t, f)
	const n = 400
	mem := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse
	}
	before, goroutines := mem(), runtime.NumGoroutine()
	for range n {
		dialFrom(t, "127.0.0.3", adm)
	}
	// Each connection's reader is up once its goroutine is.
	testutil.Eventually(t, "every connection is served", func() bool { return runtime.NumGoroutine() >= goroutines+n })
	per := (int64(mem()) - int64(before)) / n
	t.Logf("one idle admin connection: %d bytes of heap and stack (client side included), held for at most %v", per, adminHeaderTimeout)
	if per > 32<<10 {
		t.Errorf("one idle admin connection costs %d bytes, want at most 32 KiB", per)
	}
}

// Issue 27 point 12: exposure is said at start, and with a hard
// RLIMIT_NOFILE of 400 the default --max-connections (50,000) would let
// the xDS port take every descriptor, and accepts fail on both ports: the
// caps are lowered to fit, said in a log line, and the admin port keeps
// answering while the xDS port is full.
func TestExposureAndFileLimit(t *testing.T) {
	prev := hardNoFile
	hardNoFile = func() uint64 { return 400 }
	t.Cleanup(func() { hardNoFile = prev }) // after the server stops (cleanups run last first)
	var f serveFlags
	f.xdsAddr = "0.0.0.0:0"
	f.maxConns = defaultMaxConns
	xds, adm, logs := serveLogged(t, f)
	logs.await(t, "the xDS port is plaintext on a non-loopback address")
	logs.await(t, "rlimit_nofile=400 max_connections=252 was=50000 admin_max_connections=76 admin_was=256")
	_, port, _ := net.SplitHostPort(xds)
	var over int
	for i := range 260 {
		c := dialFrom(t, fmt.Sprintf("127.0.2.%d", i/16+1), "127.0.0.1:"+port)
		if i >= 252 {
			closedWithin(t, c, 10*time.Second)
			over++
		}
	}
	if code := probeFrom(t, "127.0.0.9", adm, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while the xDS port is at its cap: %d", code)
	}
	if over != 8 {
		t.Errorf("%d connections over the cap were closed, want 8", over)
	}

	// A relay without a policy says who gets its Secrets.
	var rf daemonFlags
	rf.xdsAddr = "127.0.0.1:0"
	var b strings.Builder
	rf.warnExposure(slog.New(slog.NewTextHandler(&b, nil)), true)
	if !strings.Contains(b.String(), "the relay serves every Secret it relays (private keys) to any downstream client that reaches --xds-addr") {
		t.Errorf("relay without --policy: %s", b.String())
	}
	b.Reset()
	rf.clientCA = "ca.crt"
	rf.warnExposure(slog.New(slog.NewTextHandler(&b, nil)), true)
	if !strings.Contains(b.String(), "any downstream client with a certificate --client-ca signs") || strings.Contains(b.String(), "plaintext") {
		t.Errorf("relay with mTLS, without --policy: %s", b.String())
	}
}

// The caps fit the limit: the admin port keeps at most a quarter.
func TestCapToNoFile(t *testing.T) {
	for _, tc := range []struct {
		hard               uint64
		xds, admin         int
		wantXDS, wantAdmin int
		adminAddr          string
	}{
		{0, 50000, 256, 50000, 256, "127.0.0.1:1"},       // unknown: unchanged
		{1 << 20, 50000, 256, 50000, 256, "127.0.0.1:1"}, // fits
		{1024, 50000, 256, 720, 232, "127.0.0.1:1"},
		{1024, 50000, 256, 960, 256, ""}, // no admin port
		{70, 50000, 256, 1, 1, "127.0.0.1:1"},
	} {
		f := daemonFlags{maxConns: tc.xds, adminMaxConns: tc.admin, adminAddr: tc.adminAddr}
		f.capToNoFile(tc.hard, slog.New(slog.DiscardHandler))
		if f.maxConns != tc.wantXDS || f.adminMaxConns != tc.wantAdmin {
			t.Errorf("hard %d: xds %d admin %d, want %d %d", tc.hard, f.maxConns, f.adminMaxConns, tc.wantXDS, tc.wantAdmin)
		}
	}
}
