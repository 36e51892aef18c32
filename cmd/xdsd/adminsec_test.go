package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/admin"
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
	case <-time.After(10 * time.Second):
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
