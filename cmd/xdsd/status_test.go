package main

import (
	"encoding/json"
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

// status answers "did every client take it, who NACKed and why?" from the
// server's view of its clients: a summary per type, then each client.
func TestStatus(t *testing.T) {
	xds, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, t.TempDir(), "c.yaml", cl+"name: a\n")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	good := protocoltest.NewSotW(t, conn, protocoltest.Node("good", map[string]string{"env": "prod"}))
	good.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}})
	good.Ack(good.Recv(), "a")
	bad := protocoltest.NewSotW(t, conn, protocoltest.Node("bad", nil))
	bad.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}})
	r := bad.Recv()
	bad.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "cluster a: unsupported"}})

	var rep statusReport
	testutil.Eventually(t, "status shows one client synced and one NACKed", func() bool {
		code, out, _ := runCmd(t, "status", "--admin", adm, "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Summary) != 1 {
			return false
		}
		s := rep.Summary[0]
		return s.Type == "cds" && s.Clients == 2 && s.Synced == 1 && s.NACKed == 1
	})
	code, out, errOut := runCmd(t, "status", "--admin", adm)
	if code != 0 {
		t.Fatal(errOut)
	}
	for _, want := range []string{"cds: 1/2 synced, 1 NACKed, 0 pending", "good ", "env=prod", "bad ", "NACKed version " + r.VersionInfo, "cluster a: unsupported"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// --revision: nobody has ACKed a revision the server has not reached.
	if code, out, _ := runCmd(t, "status", "--admin", adm, "--revision", "99"); code != 0 || !strings.Contains(out, "cds: 0/2 synced at revision 99 or later") {
		t.Errorf("--revision 99: %s", out)
	}
}
