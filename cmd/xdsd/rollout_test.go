package main

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// routes writes the route configuration r as two TP2 variants, env=prod
// and env=test, whose virtual host names carry tag.
func routes(prod, test string) string {
	const rt = "  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n"
	return "name: r\nconstraints: env=prod\nresource:\n" + rt + "  virtual_hosts: [{name: " + prod + ", domains: ['*']}]\n---\n" +
		"name: r\nconstraints: env=test\nresource:\n" + rt + "  virtual_hosts: [{name: " + test + ", domains: ['*']}]\n"
}

const glob = "xdstp://mesh/envoy.config.cluster.v3.Cluster/pool/*"

func clusters(a, member string) string {
	return cl + "name: a\nalt_stat_name: " + a + "\n---\n" + cl + "name: xdstp://mesh/envoy.config.cluster.v3.Cluster/pool/m1\nalt_stat_name: " + member + "\n"
}

type applyOutcome struct {
	code           int
	stdout, stderr string
}

// apply --wait follows a batch until every client it concerns answers:
// through TP2 parameters (only the clients whose parameters select a
// changed variant), a glob collection, and clients that connect during
// the wait; exit 0 when all ACKed, 3 when any NACKed, 4 on timeout.
func TestApplyWait(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	file := func(body string) string { return writeFile(t, dir, "batch.yaml", body) }
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", file(routes("p1", "t1")+"---\n"+clusters("a1", "m1"))); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sub := func(c *protocoltest.SotW, typ, name string) *discoveryv3.DiscoveryResponse {
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: []string{name}})
		r := c.Recv()
		c.Ack(r, name)
		return r
	}
	prod := protocoltest.NewSotW(t, conn, protocoltest.Node("prod-1", map[string]string{"env": "prod"}))
	sub(prod, resource.RouteURL, "r")
	test := protocoltest.NewSotW(t, conn, protocoltest.Node("test-1", map[string]string{"env": "test"}))
	sub(test, resource.RouteURL, "r")
	cds := protocoltest.NewSotW(t, conn, protocoltest.Node("cds-1", nil))
	sub(cds, resource.ClusterURL, "a")
	pool := protocoltest.NewDelta(t, conn, protocoltest.Node("pool-1", nil))
	pool.Sub(resource.ClusterURL, glob)
	pool.Ack(pool.Recv())

	start := func(args ...string) <-chan applyOutcome {
		done := make(chan applyOutcome, 1)
		go func() {
			var o applyOutcome
			// --client none: the raw streams count as grpc-go clients
			// (their gRPC user agent), which STATIC clusters would fail.
			o.code, o.stdout, o.stderr = runCmd(t, append([]string{"apply", "--admin", adm, "--client", "none", "--wait"}, args...)...)
			done <- o
		}()
		return done
	}

	// Both variants of r change: the prod client ACKs, the test client
	// NACKs; the cds client is not concerned.
	done := start("-f", file(routes("p2", "t2")+"---\n"+clusters("a1", "m1")))
	prod.Ack(prod.Recv(), "r")
	r := test.Recv()
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "route r: virtual host t2 refused"}})
	o := <-done
	if o.code != 3 {
		t.Fatalf("NACKed rollout: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	for _, want := range []string{"1 ACKed, 1 NACKed, 0 not answered", "NACKED   rds test-1", "version " + r.VersionInfo + ": route r: virtual host t2 refused"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("NACKed rollout lacks %q:\n%s", want, o.stdout)
		}
	}
	if strings.Contains(o.stdout, "cds-1") {
		t.Errorf("a client not concerned is listed:\n%s", o.stdout)
	}

	// Only the env=prod variant changes: the test client is not
	// concerned; a prod client connecting during the wait is counted.
	done = start("-f", file(routes("p3", "t2")+"---\n"+clusters("a1", "m1")))
	r = prod.Recv() // the batch is committed and on its way
	late := protocoltest.NewSotW(t, conn, protocoltest.Node("prod-late", map[string]string{"env": "prod"}))
	sub(late, resource.RouteURL, "r")
	prod.Ack(r, "r")
	o = <-done
	if o.code != 0 || !strings.Contains(o.stdout, "2 ACKed, 0 NACKed, 0 not answered") {
		t.Errorf("rollout to prod with a late client: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}

	// A glob member and a plain cluster change: the delta glob
	// subscriber and the cds client ACK.
	done = start("-f", file(routes("p3", "t2")+"---\n"+clusters("a2", "m2")))
	cds.Ack(cds.Recv(), "a")
	pool.Ack(pool.Recv())
	o = <-done
	if o.code != 0 || !strings.Contains(o.stdout, "2 ACKed, 0 NACKed, 0 not answered") {
		t.Errorf("rollout to a glob and a name: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}

	// Nobody answers: exit 4, naming who did not.
	done = start("--wait-timeout", "1s", "-f", file(routes("p3", "t2")+"---\n"+clusters("a3", "m2")))
	o = <-done
	if o.code != 4 || !strings.Contains(o.stdout, "0 ACKed, 0 NACKed, 1 not answered after 1s") || !strings.Contains(o.stdout, "PENDING  cds cds-1") {
		t.Errorf("unanswered rollout: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}

	// An apply that changes nothing has no rollout.
	if code, out, _ := runCmd(t, "apply", "--admin", adm, "--client", "none", "--wait", "-f", file(routes("p3", "t2")+"---\n"+clusters("a3", "m2"))); code != 0 || !strings.Contains(out, "no rollout to wait for") {
		t.Errorf("unchanged apply --wait: %d %s", code, out)
	}
}

// The TP2 guard rail: a delete or apply after which a resource still has
// variants, but none for the parameters a connected client subscribes
// with, is refused before it happens, naming the client; --force does it,
// and apply --wait then says which client was left without a variant.
func TestGuardStrandedClients(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "r.yaml", routes("p1", "t1"))); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	test := protocoltest.NewSotW(t, conn, protocoltest.Node("test-1", map[string]string{"env": "test"}))
	test.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	test.Ack(test.Recv(), "r")
	testutil.Eventually(t, "the server lists the subscription", func() bool {
		code, out, _ := runCmd(t, "status", "--admin", adm)
		return code == 0 && strings.Contains(out, "rds: 1/1 synced")
	})

	code, _, errOut := runCmd(t, "delete", "--admin", adm, "rds", "r", "--constraints", "env=test")
	if code != 1 || !strings.Contains(errOut, "1 client is subscribed to a resource with parameters that a variant matches now and none would after") ||
		!strings.Contains(errOut, "envoy.config.route.v3.RouteConfiguration r: client test-1 (127.0.0.1:") || !strings.Contains(errOut, "with env=test") {
		t.Errorf("delete of the variant a client uses: exit %d\n%s", code, errOut)
	}
	prodOnly := routes("p1", "t1")[:strings.Index(routes("p1", "t1"), "---")]
	if code, _, errOut = runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "r.yaml", prodOnly)); code != 1 || !strings.Contains(errOut, "client test-1") {
		t.Errorf("apply dropping the variant a client uses: exit %d\n%s", code, errOut)
	}
	// Variants the client does not use change freely.
	if code, _, errOut = runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "r.yaml", routes("p2", "t1"))); code != 0 {
		t.Errorf("apply changing another variant: %s", errOut)
	}

	// Over SotW nothing is sent for a route configuration that no longer
	// exists for the client: apply --wait does not wait for an answer
	// that cannot come, and says what happened.
	code, out, errOut := runCmd(t, "apply", "--admin", adm, "--force", "--wait", "--wait-timeout", "20s", "-f", writeFile(t, dir, "r.yaml", prodOnly))
	if code != 0 || !strings.Contains(out, "0 not answered, 1 left without a variant") || !strings.Contains(out, "NO VARIANT rds test-1") ||
		!strings.Contains(out, "r: nothing matches its parameters now") {
		t.Errorf("forced apply --wait: exit %d\n%s%s", code, out, errOut)
	}
}
