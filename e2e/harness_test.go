package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// xdsdBin is the xdsd binary the tests run, built once by TestMain.
var xdsdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "xdsd-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	xdsdBin = filepath.Join(dir, "xdsd")
	// -buildvcs=auto: stamp the VCS revision (xdsd version) even where
	// GOFLAGS turns stamping off.
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", xdsdBin, "github.com/xdsd/xdsd/cmd/xdsd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building xdsd:", err)
		os.Exit(1)
	}
	// etcd too (the replica tests), before m.Run starts the -timeout clock.
	etcdtest.Prebuild()
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		// grpc-go's xDS test resolver never releases the file watcher a
		// "tls" bootstrap builds (its bootstrap config's cleanups are not
		// run): gRPC's, not ours.
		if err := goleak.Find(goleak.IgnoreTopFunction("google.golang.org/grpc/credentials/tls/certprovider/pemfile.(*watcher).run")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is a running `xdsd serve`.
type proc struct {
	cmd   *exec.Cmd
	xds   string
	admin string
	logs  *strings.Builder
}

var servingRE = regexp.MustCompile(`msg="xdsd (?:relay )?serving" xds=(\S+) admin=(\S+)`)

// startXdsd runs `xdsd serve` on loopback ports it picks itself, with the
// given extra flags, and waits until it has loaded its store.
func startXdsd(t *testing.T, args ...string) *proc {
	t.Helper()
	return startXdsdAt(t, filepath.Join(t.TempDir(), "xdsd.db"), "127.0.0.1:0", args...)
}

// startXdsdAt runs `xdsd serve` with a given store file and xDS address, so
// that a stopped server can be started again as the same server.
func startXdsdAt(t *testing.T, storePath, xdsAddr string, args ...string) *proc {
	t.Helper()
	return startProc(t, append([]string{"serve", "--xds-addr", xdsAddr, "--admin-addr", "127.0.0.1:0",
		"--store", "bolt:" + storePath}, args...)...)
}

// startRelay runs `xdsd relay` in front of upstream.
func startRelay(t *testing.T, upstream string, args ...string) *proc {
	t.Helper()
	return startProc(t, append([]string{"relay", "--upstream", upstream, "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)...)
}

// startProc runs an xdsd command that serves, and waits until it says so.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, ok := launch(t, args...)
		if ok {
			return p
		}
		// A server started again on its old port can find it held for a
		// moment: a client reconnecting to a port nothing listens on may be
		// connected to itself by the kernel (TCP self-connect), from that
		// very port. Its gRPC connection fails at once and frees it.
		if !strings.Contains(p.logs.String(), "address already in use") || time.Now().After(deadline) {
			t.Fatalf("xdsd exited before serving:\n%s", p.logs)
		}
	}
}

// launch runs an xdsd command that serves and waits until it says so; ok
// is false if it exited first.
func launch(t *testing.T, args ...string) (p *proc, ok bool) {
	t.Helper()
	cmd := exec.Command(xdsdBin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p = &proc{cmd: cmd, logs: &strings.Builder{}}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("xdsd %v log:\n%s", args, p.logs)
		}
	})
	up := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.WriteString(line + "\n")
			if m := servingRE.FindStringSubmatch(line); m != nil {
				up <- [2]string{m[1], m[2]}
			}
		}
		close(up)
	}()
	select {
	case a, serving := <-up:
		if !serving {
			return p, false
		}
		p.xds, p.admin = a[0], a[1]
	case <-time.After(30 * time.Second):
		t.Fatalf("xdsd did not start:\n%s", p.logs)
	}
	return p, true
}

// storePath is the bolt file a server was started with.
func (p *proc) storePath() string {
	for i, a := range p.cmd.Args {
		if a == "--store" && i+1 < len(p.cmd.Args) {
			return strings.TrimPrefix(p.cmd.Args[i+1], "bolt:")
		}
	}
	return ""
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// stop interrupts the server and waits for it to exit.
func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(os.Interrupt)
	p.cmd.Wait()
}

// runXdsd runs an xdsd command to completion and returns its exit status
// and output.
func runXdsd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(xdsdBin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// apply posts YAML to the server as one batch.
func (p *proc) apply(t *testing.T, yaml string) {
	t.Helper()
	resp, err := http.Post("http://"+p.admin+"/v1/apply", "application/yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("apply: %s\n%s", resp.Status, body)
	}
}

// clients reads /v1/clients.
func (p *proc) clients(t *testing.T) []map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/v1/clients")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// metrics reads /metrics.
func (p *proc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// backend is a gRPC server with the health service; RPCs to it are told
// apart by its address.
type backend struct {
	addr string
	port int
}

func startBackend(t *testing.T) backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return backend{addr: lis.Addr().String(), port: lis.Addr().(*net.TCPAddr).Port}
}

// bootstrap is a gRPC xDS bootstrap: the default server, authorities
// (name → server address, "" meaning the default), and node metadata.
func bootstrap(server string, authorities map[string]string, meta map[string]string) []byte {
	type srv struct {
		URI      string           `json:"server_uri"`
		Creds    []map[string]any `json:"channel_creds"`
		Features []string         `json:"server_features"`
	}
	mk := func(addr string) []srv {
		return []srv{{URI: addr, Creds: []map[string]any{{"type": "insecure"}}, Features: []string{"xds_v3"}}}
	}
	auths := map[string]any{}
	for name, addr := range authorities {
		if addr == "" {
			auths[name] = map[string]any{}
		} else {
			auths[name] = map[string]any{"xds_servers": mk(addr)}
		}
	}
	b, _ := json.Marshal(map[string]any{
		"xds_servers": mk(server),
		"node":        map[string]any{"id": "e2e-" + fmt.Sprint(time.Now().UnixNano()), "locality": map[string]any{}, "metadata": meta},
		"authorities": auths,
	})
	return b
}

// dial builds a real grpc-go xDS client channel for target.
func dial(t *testing.T, target string, bootstrapJSON []byte) *grpc.ClientConn {
	t.Helper()
	r, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// rpc makes one health-check RPC, waiting for the channel's xDS
// configuration, and returns the backend that served it.
func rpc(conn *grpc.ClientConn, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var p peer.Peer
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true), grpc.Peer(&p))
	if err != nil {
		return "", err
	}
	return p.Addr.String(), nil
}

// until makes RPCs until one is served by want, or fails the test at the
// deadline. Configuration reaches a gRPC channel asynchronously, so the
// event to wait on is an RPC landing where it should.
func until(t *testing.T, conn *grpc.ClientConn, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		got, err := rpc(conn, 5*time.Second)
		if err == nil && got == want {
			return
		}
		last, lastErr = got, err
	}
	t.Fatalf("RPCs never reached %s; last went to %q (err %v)", want, last, lastErr)
}

// withPorts rewrites the example files' backend ports.
func withPorts(t *testing.T, dir string, ports map[int]int) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "examples", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/%s: %v", dir, err)
	}
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for from, to := range ports {
			s = strings.ReplaceAll(s, fmt.Sprintf("port_value: %d", from), fmt.Sprintf("port_value: %d", to))
		}
		docs = append(docs, s)
	}
	return strings.Join(docs, "\n---\n")
}

func httpDelete(url string) (int, error) {
	req, err := http.NewRequest(http.MethodDelete, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
