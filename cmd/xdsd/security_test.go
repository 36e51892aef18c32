package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// secure is a server with TLS, mTLS, a policy and admin tokens, and the
// certificates to talk to it.
type secure struct {
	dir      string
	ca       *testpki.CA
	server   testpki.Files
	xds, adm string
	// token files: write and read access
	writeTok, readTok string
}

const (
	prodID = "spiffe://example.org/ns/prod/sa/web"
	testID = "spiffe://example.org/ns/test/sa/web"
)

const testPolicy = `rules:
- clients: ["spiffe://example.org/ns/prod/*"]
  types: [cds, eds]
  names: ["prod-*"]
  params: {env: [prod]}
- clients: ["spiffe://example.org/ns/test/*"]
  types: [cds]
  names: ["test-*"]
  params: {env: [test]}
`

func startSecure(t *testing.T) *secure {
	t.Helper()
	s := &secure{dir: t.TempDir(), ca: testpki.NewCA(t, "xdsd test CA")}
	s.server = s.ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, s.ca, s.dir, "server")
	tokens := writeFile(t, s.dir, "tokens", "# admin tokens\nwwwwwwwwwwwwwwwwwwwwwwww write ci\nrrrrrrrrrrrrrrrrrrrrrrrr read dashboards\n")
	s.writeTok = writeFile(t, s.dir, "write.token", "wwwwwwwwwwwwwwwwwwwwwwww\n")
	s.readTok = writeFile(t, s.dir, "read.token", "rrrrrrrrrrrrrrrrrrrrrrrr\n")
	s.xds, s.adm = startServe(t, "--tls-cert", s.server.Cert, "--tls-key", s.server.Key, "--client-ca", s.server.CA,
		"--policy", writeFile(t, s.dir, "policy.yaml", testPolicy), "--admin-token-file", tokens)
	return s
}

// conn dials the xDS port with a client certificate (none if nil).
func (s *secure) conn(t *testing.T, leaf *testpki.Leaf) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS12}
	if leaf != nil {
		cfg.Certificates = []tls.Certificate{leaf.TLS}
	}
	c, err := grpc.NewClient(s.xds, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// streamErr opens a delta stream, sends req and returns how the stream
// ended (nil if it answered instead).
func streamErr(t *testing.T, conn *grpc.ClientConn, req *discoveryv3.DeltaDiscoveryRequest) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(req); err != nil && err != io.EOF {
		return err
	}
	_, err = st.Recv()
	return err
}

func (s *secure) applyCmd(t *testing.T, tokenFile string, args ...string) (int, string, string) {
	t.Helper()
	base := []string{"--admin", "https://" + s.adm, "--ca-file", s.server.CA}
	if tokenFile != "" {
		base = append(base, "--token-file", tokenFile)
	}
	return runCmd(t, append(args[:1:1], append(base, args[1:]...)...)...)
}

func TestSecureServe(t *testing.T) {
	s := startSecure(t)
	dir := t.TempDir()
	docs := writeFile(t, dir, "c.yaml", cl+"name: prod-a\n---\n"+cl+"name: test-a\n")
	if code, out, errOut := s.applyCmd(t, s.writeTok, "apply", "-f", docs); code != 0 {
		t.Fatalf("apply over https with a write token: exit %d\n%s%s", code, out, errOut)
	}

	t.Run("refused certificates", func(t *testing.T) {
		other := testpki.NewCA(t, "another CA")
		for name, leaf := range map[string]*testpki.Leaf{
			"no certificate": nil,
			"another CA":     other.Leaf(t, testpki.LeafOpts{URI: prodID}),
			"expired":        s.ca.Leaf(t, testpki.LeafOpts{URI: prodID, Expired: true}),
		} {
			err := streamErr(t, s.conn(t, leaf), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"prod-a"}})
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: stream ended with %v, want UNAVAILABLE (the handshake refused)", name, err)
			}
		}
	})

	prod := s.ca.Leaf(t, testpki.LeafOpts{URI: prodID})
	t.Run("denied names and types are absent", func(t *testing.T) {
		d := protocoltest.NewDelta(t, s.conn(t, prod), protocoltest.Node("web-1", map[string]string{"env": "prod"}))
		d.Sub(resource.ClusterURL, "prod-a", "test-a", "prod-missing")
		got := map[string]bool{}
		for len(got) < 3 {
			r := d.Recv()
			for _, res := range r.Resources {
				if res.Name != "prod-a" {
					t.Fatalf("sent %s, which the policy denies", res.Name)
				}
				got[res.Name] = true
			}
			for _, n := range r.RemovedResources {
				got[n] = true
			}
			d.Ack(r)
		}
		// A type no rule allows: as if nothing of it existed.
		d.Sub(resource.ListenerURL, "prod-a")
		for {
			r := d.Recv()
			if r.TypeUrl == resource.ListenerURL {
				if len(r.Resources) != 0 || len(r.RemovedResources) != 1 {
					t.Fatalf("listener of a denied type: %s", protocoltest.Describe(r))
				}
				break
			}
		}
	})

	t.Run("identity not covered", func(t *testing.T) {
		stranger := s.ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/other/sa/x"})
		d := protocoltest.NewDelta(t, s.conn(t, stranger), protocoltest.Node("x", nil))
		d.Sub(resource.ClusterURL, "prod-a")
		r := d.Recv()
		if len(r.Resources) != 0 || len(r.RemovedResources) != 1 {
			t.Fatalf("an identity no rule covers got %s", protocoltest.Describe(r))
		}
	})

	t.Run("denied parameter claims", func(t *testing.T) {
		err := streamErr(t, s.conn(t, prod), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL,
			Node: protocoltest.Node("web-2", map[string]string{"env": "test"}), ResourceNamesSubscribe: []string{"prod-a"}})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `env="test"`) {
			t.Errorf("node metadata claim: %v, want PERMISSION_DENIED naming env", err)
		}
		err = streamErr(t, s.conn(t, s.ca.Leaf(t, testpki.LeafOpts{URI: testID})), &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL,
			Node: protocoltest.Node("test-1", nil), ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{{Name: "test-a", DynamicParameters: map[string]string{"env": "prod"}}}})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `env="prod"`) {
			t.Errorf("locator claim: %v, want PERMISSION_DENIED naming env", err)
		}
		// xdsd get says the server refused, not that it cannot be reached.
		f := prod.Write(t, s.ca, t.TempDir(), "get")
		bs, _ := json.Marshal(map[string]any{
			"xds_servers": []any{map[string]any{"server_uri": s.xds, "server_features": []string{"xds_v3"},
				"channel_creds": []any{map[string]any{"type": "tls", "config": map[string]any{
					"ca_certificate_file": f.CA, "certificate_file": f.Cert, "private_key_file": f.Key}}}}},
			"node": map[string]any{"id": "get-1"},
		})
		code, _, errOut := runCmd(t, "get", "--bootstrap", writeFile(t, t.TempDir(), "bootstrap.json", string(bs)), "--param", "env=test", "--timeout", "5s", "cds", "prod-a")
		if code != 1 || !strings.Contains(errOut, "refused the stream") || !strings.Contains(errOut, `env="test"`) {
			t.Errorf("get with a denied claim: exit %d: %s", code, errOut)
		}
	})

	t.Run("certificate rotation", func(t *testing.T) {
		serial := func(addr string) string {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: s.ca.Pool(), Certificates: []tls.Certificate{prod.TLS}, NextProtos: []string{"h2"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		next := s.ca.Leaf(t, testpki.LeafOpts{Server: true})
		next.Write(t, s.ca, s.dir, "server")
		for port, addr := range map[string]string{"xDS": s.xds, "admin": s.adm} {
			if got := serial(addr); got != next.Serial.String() {
				t.Errorf("%s port after rotation: certificate %s, want the new %s", port, got, next.Serial)
			}
		}
	})

	t.Run("identity shown by status, denials counted", func(t *testing.T) {
		d := protocoltest.NewDelta(t, s.conn(t, prod), protocoltest.Node("web-3", map[string]string{"env": "prod"}))
		d.Sub(resource.ClusterURL, "prod-a")
		d.Ack(d.Recv())
		testutil.Eventually(t, "status names the identity", func() bool {
			code, out, _ := s.applyCmd(t, s.readTok, "status")
			return code == 0 && strings.Contains(out, "web-3 ("+prodID+")")
		})
		if _, page := s.get(t, "/", s.readTok); !strings.Contains(page, prodID) {
			t.Errorf("the page does not show the client's identity")
		}
		_, body := s.get(t, "/metrics", s.readTok)
		for _, want := range []string{`xdsd_denied_total{reason="name"}`, `xdsd_denied_total{reason="param"}`, `xdsd_denied_total{reason="type"}`, `xdsd_denied_total{reason="client"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// get reads an admin path over https with a token file's token.
func (s *secure) get(t *testing.T, path, tokenFile string) (int, string) {
	t.Helper()
	ac := &adminClient{addr: "https://" + s.adm, tokenFile: tokenFile, caFile: s.server.CA}
	req, err := ac.request(http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ac.client(httpClient)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminAuth(t *testing.T) {
	s := startSecure(t)
	docs := writeFile(t, t.TempDir(), "c.yaml", cl+"name: prod-a\n")
	wrong := writeFile(t, s.dir, "wrong.token", "not-a-token-at-all-xxxxx\n")
	for _, tc := range []struct {
		name, token, want string
	}{
		{"no token", "", "needs a token"},
		{"wrong token", wrong, "not valid"},
		{"read-only token", s.readTok, "dashboards may read but not write"},
	} {
		if code, _, errOut := s.applyCmd(t, tc.token, "apply", "-f", docs); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("apply with %s: exit %d %s, want a refusal saying %q", tc.name, code, errOut, tc.want)
		}
		if code, _, errOut := s.applyCmd(t, tc.token, "delete", "cds", "prod-a"); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("delete with %s: exit %d %s, want a refusal saying %q", tc.name, code, errOut, tc.want)
		}
	}
	if code, _ := s.get(t, "/v1/resources", ""); code != http.StatusUnauthorized {
		t.Errorf("read without a token: %d", code)
	}
	if code, _ := s.get(t, "/readyz", ""); code != http.StatusOK {
		t.Errorf("/readyz without a token: %d (probes need none)", code)
	}
	if code, _ := s.get(t, "/v1/resources", s.readTok); code != http.StatusOK {
		t.Errorf("read with a read token: %d", code)
	}
	// A workload certificate is no admin credential (TestAdminCertificates).
	cfg := &tls.Config{RootCAs: s.ca.Pool(), Certificates: []tls.Certificate{s.ca.Leaf(t, testpki.LeafOpts{URI: prodID}).TLS}}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	if resp, err := hc.Get("https://" + s.adm + "/v1/clients"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("read with a workload certificate: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	// A browser page of another site cannot make the operator's browser
	// apply, even with the write token (a cookie or saved credential).
	ac := &adminClient{addr: "https://" + s.adm, tokenFile: s.writeTok, caFile: s.server.CA}
	req, _ := ac.request(http.MethodPost, "/v1/apply", strings.NewReader(cl+"name: prod-x\n"))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	var eb admin.ErrorBody
	if err := ac.do(httpClient, req, &eb); err == nil || !strings.Contains(err.Error(), "cross-origin") {
		t.Errorf("cross-site POST: %v, want refused", err)
	}
	if code, out, errOut := s.applyCmd(t, s.writeTok, "apply", "-f", docs); code != 0 {
		t.Fatalf("apply with the write token: exit %d %s%s", code, out, errOut)
	}
	// The audit trail names the token, where the write came from, and what
	// it changed; the refused writes left no trace.
	code, body := s.get(t, "/v1/audit", s.readTok)
	var l store.RevisionList
	if err := json.Unmarshal([]byte(body), &l); code != http.StatusOK || err != nil || len(l.Revisions) != 1 {
		t.Fatalf("/v1/audit: %d %v %s", code, err, body)
	}
	rec := l.Revisions[0]
	if rec.Audit.Who != "ci" || !strings.HasPrefix(rec.Audit.From, "127.0.0.1:") || rec.Audit.Via != "apply" || len(rec.Changes) != 1 || rec.Changes[0].Key.Name != "prod-a" {
		t.Errorf("audit record: %+v", rec)
	}
	// A backup holds every secret whole: it needs a write token.
	if code, _ := s.get(t, "/v1/backup", s.readTok); code != http.StatusForbidden {
		t.Errorf("backup with a read token: %d, want 403", code)
	}
	// Tokens are revoked and added by editing the file: no restart.
	writeFile(t, s.dir, "tokens", "nnnnnnnnnnnnnnnnnnnnnnnn write deploy\n")
	if code, _, errOut := s.applyCmd(t, s.writeTok, "apply", "-f", docs); code == 0 || !strings.Contains(errOut, "not valid") {
		t.Errorf("apply with a revoked token: exit %d %s", code, errOut)
	}
	newTok := writeFile(t, s.dir, "new.token", "nnnnnnnnnnnnnnnnnnnnnnnn\n")
	if code, _, errOut := s.applyCmd(t, newTok, "delete", "cds", "prod-a"); code != 0 {
		t.Errorf("delete with a token added to the file: exit %d %s", code, errOut)
	}
	// Revocation fails closed (issue 27 point 9): a file that stops
	// parsing, or is deleted, revokes every token until it is fixed, and
	// /readyz says so.
	for _, damage := range []struct {
		name string
		do   func()
	}{
		{"a bad edit", func() { writeFile(t, s.dir, "tokens", "short write\n") }},
		{"an empty file", func() { writeFile(t, s.dir, "tokens", "") }},
		{"deleting it", func() { os.Remove(filepath.Join(s.dir, "tokens")) }},
	} {
		damage.do()
		if code, _ := s.get(t, "/v1/resources", newTok); code != http.StatusUnauthorized {
			t.Errorf("after %s of the token file: %d, want 401 (every token revoked)", damage.name, code)
		}
		if code, body := s.get(t, "/readyz", ""); code != http.StatusOK || !strings.Contains(body, "degraded: --admin-token-file") || !strings.Contains(body, "every admin token is revoked") {
			t.Errorf("/readyz after %s of the token file: %d %q, want degraded naming the file", damage.name, code, body)
		}
		writeFile(t, s.dir, "tokens", "nnnnnnnnnnnnnnnnnnnnnnnn write deploy\n")
		if code, _ := s.get(t, "/v1/resources", newTok); code != http.StatusOK {
			t.Errorf("after the token file was fixed: %d, want 200", code)
		}
		if code, body := s.get(t, "/readyz", ""); code != http.StatusOK || body != "ok\n" {
			t.Errorf("/readyz after the token file was fixed: %d %q", code, body)
		}
	}
}

func TestNonLoopbackAdminRefused(t *testing.T) {
	f := serveFlags{daemonFlags: daemonFlags{xdsAddr: "127.0.0.1:0", adminAddr: "0.0.0.0:0", logLevel: "error"},
		storeSpec: "bolt:" + filepath.Join(t.TempDir(), "xdsd.db")}
	err := serve(context.Background(), f, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "--insecure-admin") {
		t.Fatalf("serve with a public admin port and no credentials: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		if !loopback(addr) {
			t.Errorf("loopback(%s) = false", addr)
		}
	}
	for _, addr := range []string{":1", "0.0.0.0:1", "10.0.0.1:1", "[::]:1"} {
		if loopback(addr) {
			t.Errorf("loopback(%s) = true", addr)
		}
	}
}
