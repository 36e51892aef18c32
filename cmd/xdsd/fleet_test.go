package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
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
