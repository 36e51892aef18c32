package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// canaryIDs returns n node ids in a 25% canary and m outside it, chosen
// with the function the server uses (canary.Bucket), so the split is
// known.
func canaryIDs(prefix string, n, m int) (in, out []string) {
	for i := 0; len(in) < n || len(out) < m; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if canary.Bucket(id) < 25 {
			if len(in) < n {
				in = append(in, id)
			}
		} else if len(out) < m {
			out = append(out, id)
		}
	}
	return in, out
}

// typeState is one stream type of one node in /v1/clients.
type typeState struct {
	acked, nack string
}

// nodeTypes reads, for node id, each type's ACKed version and last NACK.
func nodeTypes(t *testing.T, x *proc, id string) map[string]typeState {
	out := map[string]typeState{}
	for _, c := range x.clients(t) {
		if c["node_id"] != id {
			continue
		}
		for _, ty := range c["types"].([]any) {
			m := ty.(map[string]any)
			st := typeState{acked: fmt.Sprint(m["acked_version"])}
			if n, ok := m["last_nack"].(map[string]any); ok {
				st.nack = fmt.Sprint(n["version"], ": ", n["error"])
			}
			out[fmt.Sprint(m["type"])] = st
		}
	}
	return out
}

// revisionOf reads the revision an apply or rollout command printed.
func revisionOf(t *testing.T, out, prefix string) int64 {
	t.Helper()
	i := strings.Index(out, prefix)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", prefix, out)
	}
	var rev int64
	fmt.Sscanf(out[i+len(prefix):], "%d", &rev)
	return rev
}

// Issue 31 with real grpc-go clients (SotW) of several nodes, and xdsd's
// own client over delta: a change staged for 25% reaches only the canary;
// promote reaches the rest; abort puts the canary back; a restart keeps
// the held state; a change grpc-go NACKs, applied with --canary 25%
// --rollback-on-nack --wait, exits 3, is aborted by the server, and no
// client outside the canary ever receives it.
func TestCanaryGRPC(t *testing.T) {
	be1, be2 := startBackend(t), startBackend(t)
	x := startXdsd(t)
	dir := t.TempDir()
	x.apply(t, chainYAML("svc", be1.port))
	inIDs, outIDs := canaryIDs("grpc", 2, 4)
	conns := map[string]*grpc.ClientConn{}
	for _, id := range append(append([]string(nil), inIDs...), outIDs...) {
		conns[id] = dial(t, "xds:///svc", nodeBootstrap(x.xds, id))
		until(t, conns[id], be1.addr)
	}
	apply := func(args ...string) (int, string, string) {
		return runXdsd(t, append([]string{"apply", "--admin", x.admin, "--client", "none"}, args...)...)
	}
	getDelta := func(id string) string {
		code, out, errOut := runXdsd(t, "get", "--server", x.xds, "--delta", "--node-id", id, "eds", "svc")
		if code != 0 {
			t.Fatalf("xdsd get --delta as %s: exit %d\n%s", id, code, errOut)
		}
		return out
	}
	dIn, dOut := canaryIDs("delta", 1, 1)

	// Stage endpoints on be2 for 25%.
	code, out, errOut := apply("--canary", "25%", "-f", writeTemp(t, dir, "eds.yaml", chainYAML("svc", be2.port)))
	if code != 0 || !strings.Contains(out, "is staged: only clients in the canary 25% get it") {
		t.Fatalf("apply --canary: exit %d\n%s%s", code, out, errOut)
	}
	staged := revisionOf(t, out, "revision ")
	for _, id := range inIDs {
		until(t, conns[id], be2.addr)
	}
	for _, id := range outIDs {
		if got, err := rpc(conns[id], 10*time.Second); err != nil || got != be1.addr {
			t.Errorf("%s, outside the canary: RPC to %s (%v), want %s", id, got, err, be1.addr)
		}
		for ty, st := range nodeTypes(t, x, id) {
			if rollout.AtLeast(st.acked, staged) {
				t.Errorf("%s, outside the canary, ACKed %s version %s of the staged revision %d", id, ty, st.acked, staged)
			}
		}
	}
	if a, b := getDelta(dIn[0]), getDelta(dOut[0]); !strings.Contains(a, fmt.Sprint(be2.port)) || !strings.Contains(b, fmt.Sprint(be1.port)) {
		t.Errorf("over delta: the canary node got\n%s\nthe other\n%s", a, b)
	}
	// Nothing else applies while it is staged.
	if code, _, errOut := apply("-f", writeTemp(t, dir, "other.yaml", chainYAML("other", be1.port))); code != 1 ||
		!strings.Contains(errOut, fmt.Sprintf("revision %d is staged for the canary 25%%", staged)) || !strings.Contains(errOut, fmt.Sprintf("xdsd rollout promote %d", staged)) {
		t.Errorf("an apply while staged: exit %d\n%s", code, errOut)
	}
	if code, out, _ := runXdsd(t, "status", "--admin", x.admin); code != 0 || !strings.Contains(out, fmt.Sprintf("STAGED revision %d for the canary 25%%", staged)) {
		t.Errorf("status while staged: exit %d\n%s", code, out)
	}

	// A restart serves the held state as before.
	x.stop()
	x = startXdsdAt(t, x.storePath(), x.xds)
	for _, id := range inIDs {
		until(t, conns[id], be2.addr)
	}
	for _, id := range outIDs {
		if got, err := rpc(conns[id], 10*time.Second); err != nil || got != be1.addr {
			t.Errorf("%s, outside the canary, after a restart: RPC to %s (%v)", id, got, err)
		}
	}

	// Promote: everyone on be2.
	if code, out, errOut := runXdsd(t, "rollout", "--admin", x.admin, "promote", fmt.Sprint(staged)); code != 0 || !strings.Contains(out, fmt.Sprintf("promoted revision %d", staged)) {
		t.Fatalf("rollout promote: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range outIDs {
		until(t, conns[id], be2.addr)
	}
	if b := getDelta(dOut[0]); !strings.Contains(b, fmt.Sprint(be2.port)) {
		t.Errorf("over delta, outside the canary, after the promote:\n%s", b)
	}

	// Stage be1 again, then abort: the canary is back on be2.
	code, out, errOut = apply("--canary", "25%", "-f", writeTemp(t, dir, "eds.yaml", chainYAML("svc", be1.port)))
	if code != 0 {
		t.Fatalf("apply --canary: exit %d\n%s%s", code, out, errOut)
	}
	staged = revisionOf(t, out, "revision ")
	for _, id := range inIDs {
		until(t, conns[id], be1.addr)
	}
	if code, out, errOut := runXdsd(t, "rollout", "--admin", x.admin, "abort", fmt.Sprint(staged)); code != 0 || !strings.Contains(out, fmt.Sprintf("aborted revision %d", staged)) {
		t.Fatalf("rollout abort: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range inIDs {
		until(t, conns[id], be2.addr)
	}
	if code, out, _ := runXdsd(t, "history", "--admin", x.admin, "--limit", "3"); code != 0 ||
		!strings.Contains(out, fmt.Sprintf("staged for the canary 25%%: aborted by revision %d", staged+1)) || !strings.Contains(out, fmt.Sprintf("aborted staged revision %d", staged)) {
		t.Errorf("history after the abort: exit %d\n%s", code, out)
	}

	// A cluster grpc-go NACKs (MAGLEV), staged with --rollback-on-nack:
	// the canary NACKs it, the server aborts it, exit 3.
	bad := strings.Replace(chainYAML("svc", be2.port), "lb_policy: ROUND_ROBIN", "lb_policy: MAGLEV", 1)
	code, out, errOut = apply("--canary", "25%", "--rollback-on-nack", "--wait", "--wait-timeout", "60s", "-f", writeTemp(t, dir, "bad.yaml", bad))
	t.Logf("apply --canary 25%% --rollback-on-nack --wait: exit %d\n%s%s", code, out, errOut)
	if code != 3 || !strings.Contains(out, "aborted by revision") || !strings.Contains(out, "NACK by grpc-") || !strings.Contains(out, "unexpected lbPolicy") {
		t.Fatalf("apply --canary --rollback-on-nack of a NACKed change: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range outIDs {
		for ty, st := range nodeTypes(t, x, id) {
			if st.nack != "" {
				t.Errorf("%s, outside the canary, NACKed %s: %s (it was sent the change)", id, ty, st.nack)
			}
		}
		if got, err := rpc(conns[id], 10*time.Second); err != nil || got != be2.addr {
			t.Errorf("%s after the abort: RPC to %s (%v)", id, got, err)
		}
	}
	for _, id := range inIDs {
		until(t, conns[id], be2.addr)
	}
	if code, out, _ := runXdsd(t, "apply", "--admin", x.admin, "--client", "none", "-f", writeTemp(t, dir, "other.yaml", chainYAML("other", be1.port))); code != 0 {
		t.Errorf("an apply after the abort: exit %d\n%s", code, out)
	}
}

// Through a relay: a param= canary reaches through it (the relay asks
// upstream with its clients' parameters), while N% would choose the relay
// as a whole (its own node id).
func TestCanaryThroughRelay(t *testing.T) {
	x := startXdsd(t)
	dir := t.TempDir()
	cds := func(tag string) string {
		return "name: c\nconstraints: env=prod\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  alt_stat_name: " + tag + "\n" +
			"---\nname: c\nconstraints: env=test\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  alt_stat_name: " + tag + "\n"
	}
	x.apply(t, cds("v1"))
	r := startRelay(t, x.xds)
	get := func(env string) string {
		code, out, errOut := runXdsd(t, "get", "--server", r.xds, "--param", "env="+env, "cds", "c")
		if code != 0 {
			t.Fatalf("xdsd get --param env=%s through the relay: exit %d\n%s", env, code, errOut)
		}
		return out
	}
	if !strings.Contains(get("prod"), "v1") || !strings.Contains(get("test"), "v1") {
		t.Fatal("before the canary")
	}
	code, out, errOut := runXdsd(t, "apply", "--admin", x.admin, "--client", "none", "--canary", "env=prod", "-f", writeTemp(t, dir, "c.yaml", cds("v2")))
	if code != 0 {
		t.Fatalf("apply --canary env=prod: exit %d\n%s%s", code, out, errOut)
	}
	staged := revisionOf(t, out, "revision ")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(get("prod"), "v2") {
		if time.Now().After(deadline) {
			t.Fatalf("through the relay, env=prod never got the staged v2:\n%s", get("prod"))
		}
	}
	if out := get("test"); !strings.Contains(out, "v1") {
		t.Errorf("through the relay, env=test (outside the canary):\n%s", out)
	}

	// Two clients stay on the relay, one of each env: the relay's one
	// stream upstream carries both parameter sets, and /v1/rollout counts
	// it in the canary by the set that matches, not by the relay's own
	// node (which has no env).
	conn, err := grpc.NewClient(r.xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, env := range []string{"prod", "test"} {
		c := protocoltest.NewSotW(t, conn, protocoltest.Node("down-"+env, map[string]string{"env": env}))
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
		resp := c.Recv()
		c.Ack(resp, "c")
	}
	var rep rollout.Report
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/rollout?rev=%d", x.admin, staged))
		if err != nil {
			t.Fatal(err)
		}
		rep = rollout.Report{}
		err = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Acked == 1 || time.Now().After(deadline) {
			break
		}
	}
	if rep.Stage == nil || rep.Acked != 1 || rep.Nacked+rep.Pending != 0 || len(rep.Entries) != 1 ||
		fmt.Sprint(rep.Entries[0].ParamSets) != "[map[env:prod]]" {
		t.Errorf("GET /v1/rollout of the env=prod canary through the relay: %+v", rep)
	}
}
