package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// Two replicas on one etcd: a client connected to B NACKs a change
// applied with --wait through A, and A's apply exits 3 naming the client
// and its replica; status and the groups on A list B's clients too.
func TestFleetAcrossReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("fleet")
	_, admA := startServe(t, "--store", url)
	xdsB, admB := startServe(t, "--store", url)
	dir := t.TempDir()
	file := func(body string) string { return writeFile(t, dir, "batch.yaml", body) }
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", file(routes("p1", "t1"))); code != 0 {
		t.Fatal(errOut)
	}
	waitRevision(t, admB, listResources(t, admA, "").Revision)
	conn, err := grpc.NewClient(xdsB, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	test := protocoltest.NewSotW(t, conn, protocoltest.Node("test-on-b", map[string]string{"env": "test"}))
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	test.Ack(test.Recv(), "r")

	// status on A names B's client and its replica.
	testutil.Eventually(t, "A's status lists the client on B", func() bool {
		code, out, _ := runCmd(t, "status", "--admin", admA)
		return code == 0 && strings.Contains(out, "test-on-b") && strings.Contains(out, "on replica "+admB)
	})
	resp, err := http.Get("http://" + admA + "/v1/groups")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var gl admin.GroupList
	if err := json.Unmarshal(body, &gl); err != nil || len(gl.Groups) != 1 || gl.Groups[0].Agent != "grpc-go" || gl.Groups[0].Count != 1 {
		t.Fatalf("A's groups: %v %s", err, body)
	}

	done := make(chan applyOutcome, 1)
	go func() {
		var o applyOutcome
		o.code, o.stdout, o.stderr = runCmd(t, "apply", "--admin", admA, "--wait", "--wait-timeout", "20s", "-f", file(routes("p1", "t2")))
		done <- o
	}()
	r := test.Recv()
	nacked := time.Now()
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "route r: virtual host t2 refused"}})
	o := <-done
	t.Logf("the NACK on B reached apply --wait on A in %v", time.Since(nacked).Round(time.Millisecond))
	if o.code != 3 {
		t.Fatalf("exit %d, want 3\n%s%s", o.code, o.stdout, o.stderr)
	}
	for _, want := range []string{"1 NACKed", "NACKED   rds test-on-b", "on replica " + admB, "virtual host t2 refused"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("apply --wait through A lacks %q:\n%s", want, o.stdout)
		}
	}
}

// onReplica connects a gRPC (grpc-go) client to a replica's xDS address
// and subscribes it to route configuration r with env=ENV; it has
// ACKed what it got when onReplica returns.
func onReplica(t *testing.T, xds, node, env string, opts ...grpc.DialOption) *protocoltest.SotW {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(xds, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := protocoltest.NewSotW(t, conn, protocoltest.Node(node, map[string]string{"env": env}))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	c.Ack(c.Recv(), "r")
	return c
}

// The guard and the checks of --client auto see every replica: through A,
// an apply that would leave a client connected to B only without a
// variant is refused naming it and its replica, and a cluster only a
// gRPC client NACKs is refused because a grpc-go client is connected to
// B; without that client it is only a warning.
func TestGuardAndChecksAcrossReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("guard")
	_, admA := startServe(t, "--store", url)
	xdsB, admB := startServe(t, "--store", url)
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", writeFile(t, dir, "r.yaml", routes("p1", "t1"))); code != 0 {
		t.Fatal(errOut)
	}
	waitRevision(t, admB, listResources(t, admA, "").Revision)
	maglev := writeFile(t, dir, "maglev.yaml", cl+"name: m\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\nlb_policy: MAGLEV\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "--dry-run", "-f", maglev); code != 0 {
		t.Fatalf("a MAGLEV cluster with no client connected: exit %d (want 0: gRPC's rules only warn)\n%s", code, errOut)
	}

	test := onReplica(t, xdsB, "test-on-b", "test")
	defer test.Close()
	prodOnly := writeFile(t, dir, "prod.yaml", "name: r\nconstraints: env=prod\nresource:\n  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  virtual_hosts: [{name: p2, domains: ['*']}]\n")
	code, out, errOut := runCmd(t, "apply", "--admin", admA, "-f", prodOnly)
	if code == 0 || !strings.Contains(errOut, "test-on-b") || !strings.Contains(errOut, "on replica "+admB) || !strings.Contains(errOut, "env=test") {
		t.Fatalf("an apply through A stranding a client on B: exit %d, want a refusal naming test-on-b on replica %s\n%s%s", code, admB, out, errOut)
	}
	code, out, errOut = runCmd(t, "apply", "--admin", admA, "-f", maglev)
	if code == 0 || !strings.Contains(errOut, "unexpected lbPolicy MAGLEV") || !strings.Contains(errOut, "1 connected grpc-go client") {
		t.Fatalf("a MAGLEV cluster through A with a grpc-go client on B: exit %d, want a refusal for that group\n%s%s", code, out, errOut)
	}
	if l := listResources(t, admA, "?name=m"); len(l.Resources) != 0 {
		t.Fatalf("a refused batch was stored: %+v", l.Resources)
	}
}

// ghostReplica registers, on the store at url, a replica whose admin API
// does not answer (its port is closed), as a replica that died leaves
// itself listed until its lease ends; it returns its name.
func ghostReplica(t *testing.T, url string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	o, err := etcd.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := etcd.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); st.Close() })
	name := "ghost-" + addr
	if err := st.Register(ctx, name, "http://"+addr); err != nil {
		t.Fatal(err)
	}
	return name
}

// A registered replica that does not answer is named, with why, by
// status, /v1/groups, /v1/clients, /v1/rollout, the page and apply (its
// clients were not checked); apply --wait does not report success while
// it is listed: it exits 4 naming it, though every client that answered
// ACKed.
func TestUnreachableReplicaIsNamed(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("ghost")
	_, admA := startServe(t, "--store", url)
	xdsB, admB := startServe(t, "--store", url)
	dir := t.TempDir()
	file := func(body string) string { return writeFile(t, dir, "batch.yaml", body) }
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", file(routes("p1", "t1"))); code != 0 {
		t.Fatal(errOut)
	}
	waitRevision(t, admB, listResources(t, admA, "").Revision)
	ghost := ghostReplica(t, url)
	if code, out, _ := runCmd(t, "status", "--admin", admA); code != 0 || out != "no client connected to the replicas that answered\n" {
		t.Fatalf("status on A with no client and a ghost replica: exit %d: %q", code, out)
	}
	test := onReplica(t, xdsB, "test-on-b", "test")
	defer test.Close()

	code, out, errOut := runCmd(t, "status", "--admin", admA)
	if code != 0 || !strings.Contains(out, "test-on-b") || !strings.Contains(errOut, "replica "+ghost+": ") || !strings.Contains(errOut, "its clients are not listed") {
		t.Fatalf("status on A with a ghost replica: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("status warns: %s", strings.TrimSpace(errOut))
	code, out, _ = runCmd(t, "status", "--admin", admA, "-o", "json")
	if code != 0 || !strings.Contains(out, `"unreachable_replicas"`) || !strings.Contains(out, ghost) {
		t.Fatalf("status -o json: %s", out)
	}
	code, out, errOut = runCmd(t, "validate", "--admin", admA, "-f", file(routes("p1", "t1")))
	if code != 0 || !strings.Contains(errOut, "replica "+ghost+" did not answer") || !strings.Contains(errOut, "its clients are not checked for") {
		t.Fatalf("validate --admin A with a ghost replica: exit %d\n%s%s", code, out, errOut)
	}
	_, body := httpGet(t, "http://"+admA+"/v1/groups")
	var gl admin.GroupList
	if err := json.Unmarshal([]byte(body), &gl); err != nil || len(gl.Groups) != 1 || len(gl.Unreachable) != 1 || gl.Unreachable[0].Replica != ghost || gl.Unreachable[0].Error == "" {
		t.Fatalf("A's groups: %v %s", err, body)
	}
	resp, err := http.Get("http://" + admA + "/v1/clients")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if inc := resp.Header.Get("X-Xdsd-Incomplete"); !strings.HasPrefix(inc, ghost+": ") {
		t.Fatalf("/v1/clients: X-Xdsd-Incomplete %q, want it to name %s", inc, ghost)
	}

	done := make(chan applyOutcome, 1)
	go func() {
		var o applyOutcome
		o.code, o.stdout, o.stderr = runCmd(t, "apply", "--admin", admA, "--wait", "--wait-timeout", "2s", "-f", file(routes("p1", "t2")))
		done <- o
	}()
	test.Ack(test.Recv(), "r")
	o := <-done
	if o.code != exitTimeout {
		t.Fatalf("apply --wait with a ghost replica: exit %d, want %d\n%s%s", o.code, exitTimeout, o.stdout, o.stderr)
	}
	for _, want := range []string{"1 ACKed, 0 NACKed, 0 not answered", "UNREACHABLE replica " + ghost} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("apply --wait lacks %q:\n%s", want, o.stdout)
		}
	}
	for _, want := range []string{"replica " + ghost + ": warning: did not answer", "[fleet/unreachable-replica]", "replica " + ghost + " did not answer within 2s"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("apply --wait's errors lack %q:\n%s", want, o.stderr)
		}
	}
	t.Logf("apply --wait: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	_, body = httpGet(t, "http://"+admA+"/v1/rollout?rev="+fmt.Sprint(listResources(t, admA, "").Revision))
	var rep rollout.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Done || len(rep.Unreachable) != 1 || rep.Unreachable[0].Replica != ghost {
		t.Fatalf("/v1/rollout with a ghost replica: %v %s", err, body)
	}
	_, page := httpGet(t, "http://"+admA+"/")
	if !strings.Contains(page, "did not answer") || !strings.Contains(page, ghost) {
		t.Fatalf("the page does not name the ghost replica:\n%s", page)
	}
}

// Replicas whose admin APIs serve TLS and ask for tokens ask one another
// trusting --admin-peer-ca and presenting --admin-peer-token-file's
// token: B takes only the replicas' token, so A's status lists B's
// client only because A presents it. A replica without the peer token
// passes on its caller's, which B refuses; one without the peer CA
// cannot verify the others: each names the replicas that did not answer
// and the flag that is missing.
func TestFleetAcrossTLSReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("tls")
	dir := t.TempDir()
	ca := testpki.NewCA(t, "xdsd replicas CA")
	srv := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	const opTok, peerTok = "oooooooooooooooooooooooo", "pppppppppppppppppppppppp"
	tokens := writeFile(t, dir, "tokens", opTok+" write ops\n"+peerTok+" read replicas\n")
	tokensB := writeFile(t, dir, "tokens-b", peerTok+" read replicas\n")
	peer := writeFile(t, dir, "peer.token", peerTok+"\n")
	op := writeFile(t, dir, "op.token", opTok+"\n")
	base := []string{"--store", url, "--tls-cert", srv.Cert, "--tls-key", srv.Key}
	_, admA := startServe(t, slices.Concat(base, []string{"--admin-token-file", tokens, "--admin-peer-ca", srv.CA, "--admin-peer-token-file", peer})...)
	xdsB, admB := startServe(t, slices.Concat(base, []string{"--admin-token-file", tokensB, "--admin-peer-ca", srv.CA, "--admin-peer-token-file", peer})...)
	_, admC := startServe(t, slices.Concat(base, []string{"--admin-token-file", tokens, "--admin-peer-ca", srv.CA})...)
	_, admD := startServe(t, slices.Concat(base, []string{"--admin-token-file", tokens, "--admin-peer-token-file", peer})...)
	as := func(adm string, args ...string) []string {
		return append(args[:1:1], append([]string{"--admin", "https://" + adm, "--ca-file", srv.CA, "--token-file", op}, args[1:]...)...)
	}
	if code, _, errOut := runCmd(t, as(admA, "apply", "-f", writeFile(t, dir, "r.yaml", routes("p1", "t1")))...); code != 0 {
		t.Fatal(errOut)
	}
	test := onReplica(t, xdsB, "test-on-b", "test", grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})))
	defer test.Close()

	code, out, errOut := runCmd(t, as(admA, "status")...)
	if code != 0 || !strings.Contains(out, "test-on-b") || !strings.Contains(out, "on replica "+admB) || errOut != "" {
		t.Fatalf("status through A: exit %d, want B's client listed and no warning\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, as(admC, "status")...)
	if code != 0 || strings.Contains(out, "test-on-b") || !strings.Contains(errOut, "replica "+admB+": 401") || !strings.Contains(errOut, "--admin-peer-token-file") ||
		strings.Contains(errOut, admA) || strings.Contains(errOut, admD) {
		t.Fatalf("status through C (no peer token: B refuses the caller's): exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, as(admD, "status")...)
	if code != 0 || !strings.Contains(errOut, "--admin-peer-ca") || strings.Count(errOut, "xdsd status: warning: replica ") != 3 {
		t.Fatalf("status through D (no peer CA): exit %d, want A, B and C named as not verified\n%s%s", code, out, errOut)
	}
	t.Logf("through D:\n%s", errOut)
}

// Replicas whose admin APIs listen on every address and ask for no
// credentials register by the machine's name, and answer one another
// asking by it (not 421, the answer to a Host they do not know).
func TestReplicasOnUnspecifiedAddresses(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	if _, err := net.LookupHost(host); err != nil {
		t.Skipf("this machine's name %s does not resolve: %v", host, err)
	}
	c := etcdtest.Start(t, 1)
	url := c.URL("any")
	loop := func(adm string) string {
		_, port, err := net.SplitHostPort(adm)
		if err != nil {
			t.Fatal(err)
		}
		return "127.0.0.1:" + port
	}
	_, admA := startServe(t, "--store", url, "--admin-addr", "0.0.0.0:0", "--insecure-admin", "true")
	xdsB, admB := startServe(t, "--store", url, "--admin-addr", "0.0.0.0:0", "--insecure-admin", "true")
	if code, _, errOut := runCmd(t, "apply", "--admin", loop(admA), "-f", writeFile(t, t.TempDir(), "r.yaml", routes("p1", "t1"))); code != 0 {
		t.Fatal(errOut)
	}
	test := onReplica(t, xdsB, "test-on-b", "test")
	defer test.Close()
	_, portB, _ := net.SplitHostPort(admB)
	code, out, errOut := runCmd(t, "status", "--admin", loop(admA))
	if code != 0 || !strings.Contains(out, "test-on-b") || !strings.Contains(out, "on replica "+net.JoinHostPort(host, portB)) || errOut != "" {
		t.Fatalf("status through A: exit %d, want B's client on replica %s\n%s%s", code, net.JoinHostPort(host, portB), out, errOut)
	}
}

// Replicas whose admin APIs take client certificates alone
// (--admin-client-ca, no token file) ask one another presenting
// --admin-peer-cert: an operator's certificate asks A, which lists B's
// client; C, without a peer certificate, has nothing to pass on (its
// caller came with a certificate) and names A and B as refusing it.
func TestFleetAcrossCertOnlyReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("certs")
	dir := t.TempDir()
	ca, adminCA := testpki.NewCA(t, "xdsd replicas CA"), testpki.NewCA(t, "xdsd admin CA")
	srv := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	peer := adminCA.Leaf(t, testpki.LeafOpts{}).Write(t, adminCA, dir, "peer")
	operator := adminCA.Leaf(t, testpki.LeafOpts{})
	base := []string{"--store", url, "--tls-cert", srv.Cert, "--tls-key", srv.Key, "--admin-client-ca", peer.CA, "--admin-peer-ca", srv.CA}
	_, admA := startServe(t, slices.Concat(base, []string{"--admin-peer-cert", peer.Cert, "--admin-peer-key", peer.Key})...)
	xdsB, admB := startServe(t, slices.Concat(base, []string{"--admin-peer-cert", peer.Cert, "--admin-peer-key", peer.Key})...)
	_, admC := startServe(t, base...)
	hc := certClient(t, ca, operator)
	if code, body := adminDo(t, hc, "https", admA, admA, http.MethodPost, "/v1/apply", routes("p1", "t1"), "Content-Type", "application/yaml"); code != http.StatusOK {
		t.Fatalf("apply: %d %s", code, body)
	}
	test := onReplica(t, xdsB, "test-on-b", "test", grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12})))
	defer test.Close()

	code, body := adminDo(t, hc, "https", admA, admA, http.MethodGet, "/v1/groups", "")
	var gl admin.GroupList
	if err := json.Unmarshal([]byte(body), &gl); code != http.StatusOK || err != nil || len(gl.Groups) != 1 || gl.Groups[0].Nodes[0] != "test-on-b" || len(gl.Unreachable) != 0 {
		t.Fatalf("A's groups, asked with a certificate: %d %v %s", code, err, body)
	}
	if code, body := adminDo(t, hc, "https", admA, admA, http.MethodGet, "/v1/clients", ""); code != http.StatusOK || !strings.Contains(body, `"replica": "`+admB+`"`) {
		t.Fatalf("A's clients: %d %s", code, body)
	}
	code, body = adminDo(t, hc, "https", admC, admC, http.MethodGet, "/v1/groups", "")
	gl = admin.GroupList{}
	if err := json.Unmarshal([]byte(body), &gl); code != http.StatusOK || err != nil || len(gl.Groups) != 0 || len(gl.Unreachable) != 2 ||
		!strings.Contains(gl.Unreachable[0].Error, "401") || !strings.Contains(gl.Unreachable[0].Error, "--admin-peer-cert") {
		t.Fatalf("C's groups (no peer certificate): %d %v %s", code, err, body)
	}
}
