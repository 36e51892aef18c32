package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
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

// securingSteps reads the README's "Securing xdsd" walkthrough (between
// <!-- securing --> and <!-- /securing -->): the files it shows (a fenced
// block after <!-- file: NAME -->) and the commands of its sh blocks, in
// order.
type securingStep struct {
	file, content string // a file to write
	cmd           string // or a command
}

func securingSteps(t *testing.T) []securingStep {
	t.Helper()
	block := readmeBlock(t, "securing")
	var steps []securingStep
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if name, ok := strings.CutPrefix(line, "<!-- file: "); ok {
			name = strings.TrimSuffix(name, " -->")
			i++ // the opening fence
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			steps = append(steps, securingStep{file: name, content: strings.Join(body, "\n") + "\n"})
			continue
		}
		if line != "```sh" {
			continue
		}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			if c := strings.TrimSpace(lines[i]); c != "" && !strings.HasPrefix(c, "#") {
				steps = append(steps, securingStep{cmd: c})
			}
		}
	}
	return steps
}

// The README's "Securing xdsd" walkthrough runs as shown: certificates
// made with openssl, the server started with them and the policy, the
// commands marked "!" refused and the others succeeding, the rotation
// too. The README's ports (18000, 18001) become free ones (freePorts), in
// the commands and in the bootstrap files.
func TestREADMESecuring(t *testing.T) {
	for _, tool := range []string{"bash", "openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	steps := securingSteps(t)
	dir := t.TempDir()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(xdsdBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	p := freePorts(t)
	ran := 0
	for _, s := range steps {
		if s.file != "" {
			writeTemp(t, dir, s.file, p.text(s.content))
			continue
		}
		ran++
		if strings.HasSuffix(s.cmd, "&") {
			// The admin port serves TLS: readiness is asked for over https,
			// trusting the CA the walkthrough made.
			pool, err := mtls.LoadPool(filepath.Join(dir, "ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			defer hc.CloseIdleConnections()
			startBackground(t, p.command(s.cmd), dir, env, hc, "https://"+p.addr(18001)+"/readyz")
			continue
		}
		c, refused := strings.CutPrefix(s.cmd, "! ")
		c = p.command(c)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", c)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		cancel()
		if (err != nil) != refused {
			t.Fatalf("README command %q: %v (want refused: %v)\n%s", s.cmd, err, refused, out)
		}
		t.Logf("$ %s\n%s", s.cmd, out)
	}
	if ran < 15 {
		t.Fatalf("the walkthrough has %d commands", ran)
	}
}
