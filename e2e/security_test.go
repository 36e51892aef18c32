package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testpki"
)

// tlsBootstrap is a gRPC xDS bootstrap whose server is reached over TLS
// with the file-watcher fields of gRFC A65 (a client certificate: mTLS).
func tlsBootstrap(server string, f testpki.Files, meta map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri": server,
			"channel_creds": []any{map[string]any{"type": "tls", "config": map[string]any{
				"ca_certificate_file": f.CA, "certificate_file": f.Cert, "private_key_file": f.Key}}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": "e2e-" + fmt.Sprint(time.Now().UnixNano()), "locality": map[string]any{}, "metadata": meta},
	})
	return b
}

// The policy of the origin and of the relay: prod workloads get
// everything with env=prod, the relay may fetch anything.
const e2ePolicy = `rules:
- clients: ["spiffe://example.org/ns/prod/*"]
  params: {env: [prod]}
- clients: ["spiffe://example.org/relay"]
`

// The real grpc-go xDS client gets its configuration from `xdsd serve`
// over mTLS, with an A65 TLS bootstrap; `xdsd relay` in front of it
// enforces the same policy on its own downstream clients, and presents its
// own certificate upstream.
func TestGRPCOverMTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "e2e CA")
	serverFiles := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	prod := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/prod/sa/web"}).Write(t, ca, dir, "prod")
	test := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/test/sa/web"}).Write(t, ca, dir, "test")
	relayUp := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/relay"}).Write(t, ca, dir, "relay-up")
	relayDown := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "relay-down")
	policy := writeTemp(t, dir, "policy.yaml", e2ePolicy)
	secure := []string{"--tls-cert", serverFiles.Cert, "--tls-key", serverFiles.Key, "--client-ca", serverFiles.CA, "--policy", policy}

	be := startBackend(t)
	x := startXdsd(t, secure...)
	docs := writeTemp(t, dir, "quickstart.yaml", withPorts(t, "quickstart", map[int]int{50051: be.port}))
	if code, out, errOut := runXdsd(t, "apply", "--admin", "https://"+x.admin, "--ca-file", serverFiles.CA, "-f", docs); code != 0 {
		t.Fatalf("apply over https: exit %d\n%s%s", code, out, errOut)
	}
	until(t, dial(t, "xds:///quickstart", tlsBootstrap(x.xds, prod, map[string]string{"env": "prod"})), be.addr)

	// The relay: mTLS and the policy downstream, its own certificate up.
	relayBS := writeTemp(t, dir, "relay-bootstrap.json", string(tlsBootstrap(x.xds, relayUp, nil)))
	r := startProc(t, "relay", "--bootstrap", relayBS, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
		"--tls-cert", relayDown.Cert, "--tls-key", relayDown.Key, "--client-ca", relayDown.CA, "--policy", policy)
	until(t, dial(t, "xds:///quickstart", tlsBootstrap(r.xds, prod, map[string]string{"env": "prod"})), be.addr)

	// Through the relay, an identity the policy does not cover is told the
	// listener does not exist, and a prod workload claiming env=test is
	// refused, naming the parameter (xdsd get with a TLS bootstrap).
	testBS := writeTemp(t, dir, "test-bootstrap.json", string(tlsBootstrap(r.xds, test, nil)))
	if code, out, errOut := runXdsd(t, "get", "--bootstrap", testBS, "--delta", "--timeout", "20s", "lds", "quickstart"); code != 1 || !strings.Contains(out, "does-not-exist") {
		t.Errorf("uncovered identity through the relay: exit %d\n%s%s", code, out, errOut)
	}
	claimBS := writeTemp(t, dir, "claim-bootstrap.json", string(tlsBootstrap(r.xds, prod, map[string]string{"env": "test"})))
	if code, out, errOut := runXdsd(t, "get", "--bootstrap", claimBS, "--delta", "--timeout", "20s", "lds", "quickstart"); code == 0 || !strings.Contains(out+errOut, "env") {
		t.Errorf("denied claim through the relay: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runXdsd(t, "get", "--bootstrap", writeTemp(t, dir, "prod-bootstrap.json", string(tlsBootstrap(r.xds, prod, map[string]string{"env": "prod"}))),
		"--delta", "--timeout", "20s", "lds", "quickstart"); code != 0 || !strings.Contains(out, "name: quickstart") {
		t.Errorf("prod workload through the relay: exit %d\n%s%s", code, out, errOut)
	}
}
