// Package etcdtest starts real etcd servers for tests: an etcd binary
// built from the etcd server's Go module (BuildBinary; $ETCD may name
// another) on 127.0.0.1 ports, with a temporary data directory, stopped
// when the test ends. Tests need Go and nothing else: no etcd on $PATH.
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd binary for a test (BuildBinary: $ETCD, else
// built once per machine from etcd's Go module). It fails the test when
// there is none; it never skips, so the etcd tests run wherever the test
// command runs.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := BuildBinary(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Prebuild builds the etcd binary (BuildBinary) from a TestMain, before
// m.Run starts the test binary's -timeout clock: the first build on a
// machine can take minutes on a loaded one, which should not count
// against the tests. A failure is not reported here: the tests that ask
// for etcd report it.
func Prebuild() {
	BuildBinary(context.Background(), func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "etcdtest: "+format+"\n", args...)
	})
}

// Member is one etcd server.
type Member struct {
	Name   string
	Client string // host:port
	peer   string
	dir    string
	args   []string
	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	t       testing.TB
	o       Options
	// root's password once EnableAuth ran: the test's own clients
	// (Client, Wait) then sign in as root.
	rootPassword string
}

// Options shape a cluster started by StartWith.
type Options struct {
	// CertFile and KeyFile, when set, make the members serve clients over
	// TLS with this certificate (https client URLs; peers stay plaintext).
	CertFile, KeyFile string
	// CAFile, with ClientCertAuth, makes the members require client
	// certificates signed by it.
	CAFile         string
	ClientCertAuth bool
	// ClientTLS is the TLS configuration the test's own clients (Client,
	// Wait) connect with; needed with CertFile.
	ClientTLS *tls.Config
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Start starts an n-member cluster and waits until it serves.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith starts an n-member cluster shaped by o and waits until it
// serves.
func StartWith(t testing.TB, n int, o Options) *Cluster {
	t.Helper()
	bin := Binary(t)
	c := &Cluster{t: t, o: o}
	scheme := "http://"
	if o.CertFile != "" {
		scheme = "https://"
	}
	var initial []string
	for i := range n {
		m := &Member{Name: fmt.Sprintf("m%d", i), Client: freePort(t), peer: freePort(t), dir: t.TempDir(), bin: bin}
		c.Members = append(c.Members, m)
		initial = append(initial, fmt.Sprintf("%s=http://%s", m.Name, m.peer))
	}
	for _, m := range c.Members {
		m.args = []string{
			"--name", m.Name, "--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", scheme + m.Client, "--advertise-client-urls", scheme + m.Client,
			"--listen-peer-urls", "http://" + m.peer, "--initial-advertise-peer-urls", "http://" + m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "xdsd-test", "--logger", "zap", "--log-outputs", filepath.Join(m.dir, "etcd.log"),
			// etcd's default heartbeat, and twice its election timeout: on
			// a loaded test machine a member that misses 500 ms of
			// heartbeats starts an election, and requests meanwhile fail
			// with "no leader" although nothing was killed.
			"--heartbeat-interval", "100", "--election-timeout", "2000",
		}
		if o.CertFile != "" {
			m.args = append(m.args, "--cert-file", o.CertFile, "--key-file", o.KeyFile)
		}
		if o.ClientCertAuth {
			m.args = append(m.args, "--client-cert-auth", "--trusted-ca-file", o.CAFile)
		}
		if err := m.start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Kill() })
	}
	c.Wait(t, c.Endpoints()...)
	return c
}

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cmd := exec.Command(m.bin, m.args...)
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	m.cmd = cmd
	m.exited = make(chan struct{})
	go func(ch chan struct{}) { cmd.Wait(); close(ch) }(m.exited)
	return nil
}

// Kill stops the member with SIGKILL and waits until it is gone.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, ch := m.cmd, m.exited
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-ch
}

// Restart starts a killed member again, on its data.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	if err := m.start(); err != nil {
		t.Fatal(err)
	}
}

// Log is what the member logged, for failure messages.
func (m *Member) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
	return string(b)
}

// Endpoints lists the members' client addresses.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.Client)
	}
	return out
}

// URL is the --store value for the cluster, under prefix.
func (c *Cluster) URL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints(), ",") + "/" + prefix
}

// Wait waits until a linearizable read through endpoints succeeds.
func (c *Cluster) Wait(t testing.TB, endpoints ...string) {
	t.Helper()
	cl, err := clientv3.New(c.config(endpoints))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(3 * time.Minute) // generous: a loaded machine
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Get(ctx, "health")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			var logs string
			for _, m := range c.Members {
				logs += m.Name + ":\n" + m.Log()
			}
			t.Fatalf("etcd did not come up: %v\n%s", err, logs)
		}
	}
}

// Client returns a client of the cluster, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(c.config(c.Endpoints()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// config is the configuration of the test's own clients.
func (c *Cluster) config(endpoints []string) clientv3.Config {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop(), TLS: c.o.ClientTLS}
	if c.rootPassword != "" {
		cfg.Username, cfg.Password = "root", c.rootPassword
	}
	return cfg
}

// EnableAuth turns etcd's authentication on, with user (password
// password) allowed to read and write the keys under prefix and nothing
// else, as an operator would set it up for xdsd. The test's own clients
// sign in as root from then on.
func (c *Cluster) EnableAuth(t testing.TB, user, password, prefix string) {
	t.Helper()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := "root-" + password
	steps := []func() error{
		func() error { _, err := cl.UserAdd(ctx, "root", root); return err },
		func() error { _, err := cl.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cl.RoleAdd(ctx, "xdsd"); return err },
		func() error {
			_, err := cl.RoleGrantPermission(ctx, "xdsd", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cl.UserAdd(ctx, user, password); return err },
		func() error { _, err := cl.UserGrantRole(ctx, user, "xdsd"); return err },
		func() error { _, err := cl.AuthEnable(ctx); return err },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("enabling etcd auth, step %d: %v", i+1, err)
		}
	}
	c.rootPassword = root
}
