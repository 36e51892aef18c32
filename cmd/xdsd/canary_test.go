package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// cdsWatch is a SotW stream subscribed to cluster c, read and ACKed on
// the test's goroutine: what it was last sent is the cluster's
// alt_stat_name.
type cdsWatch struct {
	c    *protocoltest.SotW
	tags []string
	nack string // a tag it NACKs instead of ACKing
}

func newCDSWatch(t *testing.T, conn *grpc.ClientConn, id string) *cdsWatch {
	c := protocoltest.NewSotW(t, conn, protocoltest.Node(id, nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
	return &cdsWatch{c: c}
}

func (w *cdsWatch) last() string {
	for {
		select {
		case r := <-w.c.Resps:
			bad := false
			for _, a := range r.Resources {
				var cl clusterv3.Cluster
				if proto.Unmarshal(a.Value, &cl) == nil {
					w.tags = append(w.tags, cl.AltStatName)
					bad = bad || (w.nack != "" && cl.AltStatName == w.nack)
				}
			}
			if bad {
				w.c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}, ResponseNonce: r.Nonce,
					ErrorDetail: &status.Status{Code: 3, Message: "cluster c refused"}})
			} else {
				w.c.Ack(r, "c")
			}
			continue
		default:
		}
		if len(w.tags) == 0 {
			return ""
		}
		return w.tags[len(w.tags)-1]
	}
}

func (w *cdsWatch) wait(t *testing.T, tag string) {
	t.Helper()
	testutil.Eventually(t, "a stream to be sent "+tag, func() bool { return w.last() == tag })
}

// nodeIn returns a node id in a 25% canary (in) or out of it.
func nodeIn(in bool) string { return nodeInAfter(in, 0) }

// nodeInAfter is nodeIn, skipping the first skip such node ids.
func nodeInAfter(in bool, skip int) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("n-%d", i)
		if (canary.Bucket(id) < 25) == in {
			if skip == 0 {
				return id
			}
			skip--
		}
	}
}

// A second replica on etcd serves the held state of a revision staged
// through the first exactly as the first does; writes through it are
// refused while it is staged; a bake is promoted by the replica whose
// canary client ACKed, and apply --wait reports it.
func TestCanaryReplicasOnEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("canary")
	_, admA := startServe(t, "--store", url)
	xdsB, admB := startServe(t, "--store", url)
	dir := t.TempDir()
	file := func(tag string) string { return writeFile(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: "+tag+"\n") }
	apply := func(adm string, args ...string) (int, string, string) {
		return runCmd(t, append([]string{"apply", "--admin", adm, "--client", "none"}, args...)...)
	}
	if code, _, errOut := apply(admA, "-f", file("v1")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xdsB, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in, out := newCDSWatch(t, conn, nodeIn(true)), newCDSWatch(t, conn, nodeIn(false))
	in.wait(t, "v1")
	out.wait(t, "v1")

	code, stdout, errOut := apply(admA, "--canary", "25%", "-f", file("v2"))
	if code != 0 {
		t.Fatalf("apply --canary through A: exit %d\n%s%s", code, stdout, errOut)
	}
	in.wait(t, "v2")
	if got := out.last(); got != "v1" {
		t.Fatalf("on replica B, outside the canary: %s, want v1", got)
	}
	staged := listResources(t, admA, "").Revision
	if code, _, errOut := apply(admB, "-f", file("v3")); code != 1 || !strings.Contains(errOut, fmt.Sprintf("revision %d is staged", staged)) {
		t.Errorf("apply through B while staged: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "rollback", "--admin", admB, "1"); code != 1 || !strings.Contains(errOut, fmt.Sprintf("xdsd rollout abort %d", staged)) {
		t.Errorf("rollback through B while staged: exit %d\n%s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "rollout", "--admin", admB, "promote", fmt.Sprint(staged)); code != 0 {
		t.Fatalf("promote through B: exit %d\n%s%s", code, out, errOut)
	}
	out.wait(t, "v2")

	// A wait shorter than the bake is refused up front.
	if code, _, errOut := apply(admA, "--canary", "25%", "--bake", "5m", "--wait", "-f", file("v3")); code != 2 || !strings.Contains(errOut, "is not longer than --bake 5m0s") {
		t.Errorf("--wait-timeout 60s with --bake 5m: exit %d\n%s", code, errOut)
	}
	// A bake: the canary client on B ACKs, B (which alone sees it)
	// promotes, and the wait through A says so.
	type outcome struct {
		code        int
		out, errOut string
	}
	done := make(chan outcome, 1)
	f3 := file("v3")
	go func() {
		var o outcome
		o.code, o.out, o.errOut = apply(admA, "--canary", "25%", "--bake", "1s", "--wait", "--wait-timeout", "60s", "-f", f3)
		done <- o
	}()
	in.wait(t, "v3") // (and ACKs it)
	o := <-done
	code, stdout, errOut = o.code, o.out, o.errOut
	if code != 0 || !strings.Contains(stdout, "promoted by revision") || !strings.Contains(stdout, "bake of 1s passed") {
		t.Fatalf("apply --canary --bake --wait: exit %d\n%s%s", code, stdout, errOut)
	}
	out.wait(t, "v3")
	if code, stdout, _ := runCmd(t, "history", "--admin", admB, "--limit", "2"); code != 0 || !strings.Contains(stdout, "promoted staged revision") || !strings.Contains(stdout, "by the server: bake of 1s passed") {
		t.Errorf("history: exit %d\n%s", code, stdout)
	}
}

// With replicas on etcd, a staged revision is judged over the whole
// fleet's canary: a canary client on B that NACKs holds off A's promote
// after the bake though A's own canary client ACKed (A says why, and the
// revision stays staged until a person aborts it), and with
// --rollback-on-nack the revision applied through A is aborted.
func TestCanaryJudgedAcrossReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("canary-fleet")
	logA := &syncBuffer{}
	xdsA, admA, _ := startServeLogged(t, logA, "--store", url)
	xdsB, _ := startServe(t, "--store", url)
	dir := t.TempDir()
	file := func(tag string) string { return writeFile(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: "+tag+"\n") }
	apply := func(adm string, args ...string) (int, string, string) {
		return runCmd(t, append([]string{"apply", "--admin", adm, "--client", "none"}, args...)...)
	}
	if code, _, errOut := apply(admA, "-f", file("v1")); code != 0 {
		t.Fatal(errOut)
	}
	dial := func(addr string) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	onA, onB := newCDSWatch(t, dial(xdsA), nodeInAfter(true, 0)), newCDSWatch(t, dial(xdsB), nodeInAfter(true, 1))
	onB.nack = "bad"
	onA.wait(t, "v1")
	onB.wait(t, "v1")

	if code, stdout, errOut := apply(admA, "--canary", "25%", "--bake", "1s", "-f", file("bad")); code != 0 {
		t.Fatalf("apply --canary --bake through A: exit %d\n%s%s", code, stdout, errOut)
	}
	staged := listResources(t, admA, "").Revision
	onA.wait(t, "bad") // and ACKs it
	onB.wait(t, "bad") // and NACKs it
	testutil.Eventually(t, "A to hold off the promote for B's NACK", func() bool {
		onA.last()
		onB.last()
		logA.mu.Lock()
		defer logA.mu.Unlock()
		return strings.Contains(logA.b.String(), "a canary client on another replica NACKed it")
	})
	// The reason is in the rollout report and in status, not only in
	// the log.
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/rollout?rev=%d", admA, staged))
	if err != nil {
		t.Fatal(err)
	}
	var rep rollout.Report
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.Stage == nil || !strings.Contains(rep.Stage.HeldOff, "a canary client on another replica NACKed it") || !strings.Contains(rep.Stage.HeldOff, "cluster c refused") {
		t.Errorf("GET /v1/rollout of the held revision: %+v %v", rep.Stage, err)
	}
	if code, out, errOut := runCmd(t, "status", "--admin", admA); code != 0 ||
		!strings.Contains(out, "the server holds off promoting it: a canary client on another replica NACKed it") {
		t.Errorf("status of the held revision: exit %d\n%s%s", code, out, errOut)
	}
	if resp, err := http.Get("http://" + admA + "/"); err != nil {
		t.Error(err)
	} else {
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), "the server holds off promoting it: a canary client on another replica NACKed it") {
			t.Errorf("the admin page of the held revision does not say why it is held off")
		}
	}
	if code, out, errOut := runCmd(t, "rollout", "--admin", admA, "abort", fmt.Sprint(staged)); code != 0 {
		t.Fatalf("abort after the bake with a NACK on B: exit %d\n%s%s", code, out, errOut)
	}
	onA.wait(t, "v1")

	done := make(chan [3]any, 1)
	fb := file("bad")
	go func() {
		code, out, errOut := apply(admA, "--canary", "25%", "--rollback-on-nack", "--wait", "--wait-timeout", "60s", "-f", fb)
		done <- [3]any{code, out, errOut}
	}()
	var o [3]any
	testutil.Eventually(t, "the canary apply through A to end", func() bool {
		onA.last()
		onB.last()
		select {
		case o = <-done:
			return true
		default:
			return false
		}
	})
	code, out, errOut := o[0].(int), o[1].(string), o[2].(string)
	if code != 3 || !strings.Contains(out, "the server, on a canary NACK") || !strings.Contains(out, "cluster c refused") {
		t.Fatalf("apply --canary --rollback-on-nack through A, NACKed on B: exit %d\n%s%s", code, out, errOut)
	}
	onA.wait(t, "v1")
	onB.wait(t, "v1")
}

// apply --rollback-on-nack --wait without --canary: a client's NACK has
// the command roll the change back (only its own revision), exit 3,
// naming the NACK and the revision that undid it.
func TestApplyRollbackOnNack(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	file := func(tag string) string { return writeFile(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: "+tag+"\n") }
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file("v1")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w := newCDSWatch(t, conn, "nacker")
	w.wait(t, "v1")
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--rollback-on-nack", "-f", file("v2")); code != 2 || !strings.Contains(errOut, "add --wait") {
		t.Errorf("--rollback-on-nack without --wait: exit %d\n%s", code, errOut)
	}
	done := make(chan [3]any, 1)
	f2 := file("v2")
	go func() {
		code, out, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "--rollback-on-nack", "--wait", "--wait-timeout", "60s", "-f", f2)
		done <- [3]any{code, out, errOut}
	}()
	var r *discoveryv3.DiscoveryResponse
	select {
	case r = <-w.c.Resps:
	case <-time.After(testutil.Wait):
		t.Fatal("the change never came")
	}
	w.c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "cluster c refused"}})
	o := <-done
	code, out, errOut := o[0].(int), o[1].(string), o[2].(string)
	if code != 3 || !strings.Contains(out, "cluster c refused") || !strings.Contains(out, "rolled back: revision 3 restores the state of revision 1") ||
		!strings.Contains(errOut, "rolled back by revision 3") {
		t.Fatalf("apply --rollback-on-nack of a NACKed change: exit %d\n%s%s", code, out, errOut)
	}
	w.wait(t, "v1")
}

// A replica that starts with --watch while a revision is staged (through
// another replica) starts and serves: the directory waits, /readyz says
// why, and it is applied once the staged revision is aborted.
func TestWatchStartsWhileStaged(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("canary-watch")
	_, admB := startServe(t, "--store", url)
	files := t.TempDir()
	apply := func(args ...string) (int, string, string) {
		return runCmd(t, append([]string{"apply", "--admin", admB, "--client", "none"}, args...)...)
	}
	if code, _, errOut := apply("-f", writeFile(t, files, "c.yaml", cl+"name: c\nalt_stat_name: v1\n")); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := apply("--canary", "25%", "-f", writeFile(t, files, "c.yaml", cl+"name: c\nalt_stat_name: v2\n")); code != 0 {
		t.Fatal(errOut)
	}
	staged := listResources(t, admB, "").Revision
	dir := t.TempDir()
	writeFile(t, dir, "w.yaml", cl+"name: watched\n")
	logA := &syncBuffer{}
	_, admA, _ := startServeLogged(t, logA, "--store", url, "--watch", dir)
	resp, err := http.Get("http://" + admA + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), fmt.Sprintf("is not applied while revision %d is staged for the canary 25%%", staged)) {
		t.Errorf("/readyz of a replica whose --watch waits for a staged revision: %s %s", resp.Status, body)
	}
	logA.mu.Lock()
	if !strings.Contains(logA.b.String(), "watched directory not applied at start: a revision is staged") {
		t.Errorf("no log of the held directory:\n%s", logA.b.String())
	}
	logA.mu.Unlock()
	if code, out, errOut := runCmd(t, "rollout", "--admin", admB, "abort", fmt.Sprint(staged)); code != 0 {
		t.Fatalf("abort: exit %d\n%s%s", code, out, errOut)
	}
	testutil.Eventually(t, "the watched directory to be applied after the abort", func() bool {
		for _, r := range listResources(t, admA, "").Resources {
			if r.Name == "watched" {
				return true
			}
		}
		return false
	})
}

// The race of issue 31's TestCanaryGRPC failure under load: the server
// aborts a staged revision on a canary NACK, and the canary ACKs the
// abort before the command's wait first looks. The rollout then shows no
// NACK (the client holds the abort's version), yet the command must
// still print the NACK — from the server's record of why it aborted.
func TestCanaryNackPrintedAfterTheAbortIsACKed(t *testing.T) {
	xds, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", writeFile(t, t.TempDir(), "c.yaml", cl+"name: c\nalt_stat_name: v1\n")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in := newCDSWatch(t, conn, nodeIn(true))
	in.nack = "bad"
	in.wait(t, "v1")
	resp, err := http.Post("http://"+adm+"/v1/apply?source=body&canary=25%25&abort_on_nack=true", "application/yaml", strings.NewReader(cl+"name: c\nalt_stat_name: bad\n"))
	if err != nil {
		t.Fatal(err)
	}
	var res admin.ApplyResult
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("apply --canary: %s %v", resp.Status, err)
	}
	staged := res.Revision
	in.wait(t, "bad") // NACKed
	in.wait(t, "v1")  // the abort, ACKed
	testutil.Eventually(t, "the rollout to show the abort ACKed", func() bool {
		in.last()
		rep, err := fetchRollout(&adminClient{addr: adm}, staged, 0)
		return err == nil && rep.Stage != nil && rep.Stage.State == store.StateAborted && rep.Nacked == 0 && rep.Acked == 1
	})
	var out strings.Builder
	err = waitStaged(&adminClient{addr: adm}, staged, 10*time.Second, &out)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != exitNacked || !strings.Contains(out.String(), fmt.Sprintf("aborted by revision %d", staged+1)) ||
		!strings.Contains(out.String(), "NACK by "+nodeIn(true)) || !strings.Contains(out.String(), "cluster c refused") {
		t.Fatalf("the wait of a revision aborted on a NACK, the abort ACKed since: %v\n%s", err, out.String())
	}
}

// apply --canary --bake --wait whose staged revision a person aborts
// (xdsd rollout abort, from another shell) while no client NACKed it
// says so — which revision, whose command — and exits 6, not 3 (a NACK).
func TestCanaryWaitAbortedByAPerson(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	file := func(tag string) string { return writeFile(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: "+tag+"\n") }
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", file("v1")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in := newCDSWatch(t, conn, nodeIn(true))
	in.wait(t, "v1")
	done := make(chan [3]any, 1)
	f2 := file("v2")
	go func() {
		code, out, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "--canary", "25%", "--bake", "30m", "--wait", "--wait-timeout", "40m", "-f", f2)
		done <- [3]any{code, out, errOut}
	}()
	in.wait(t, "v2") // staged, and ACKed by the canary client
	staged := listResources(t, adm, "").Revision
	if code, out, errOut := runCmd(t, "rollout", "--admin", adm, "abort", fmt.Sprint(staged)); code != 0 {
		t.Fatalf("rollout abort: exit %d\n%s%s", code, out, errOut)
	}
	var o [3]any
	testutil.Eventually(t, "the waiting apply to end", func() bool {
		in.last()
		select {
		case o = <-done:
			return true
		default:
			return false
		}
	})
	code, out, errOut := o[0].(int), o[1].(string), o[2].(string)
	want := fmt.Sprintf("revision %d aborted by revision %d (`xdsd rollout abort %d` from 127.0.0.1:", staged, staged+1, staged)
	if code != exitAborted || !strings.Contains(out, want) || strings.Contains(out, "NACK by") ||
		!strings.Contains(errOut, fmt.Sprintf("revision %d was aborted by a person, not NACKed", staged)) {
		t.Fatalf("apply --canary --bake --wait aborted by a person: exit %d, want %d and %q\n%s%s", code, exitAborted, want, out, errOut)
	}
	in.wait(t, "v1")
}

// With replicas on etcd, a replica that does not answer about its canary
// holds a baked revision off: replica B stops (its admin API closed, its
// registration left to its lease, as when a replica dies) while A's
// canary client ACKs and the bake ends. A does not promote; GET
// /v1/rollout and xdsd status say that B did not answer; once B's lease
// ends, A judges the bake by the replicas left and promotes it.
func TestCanaryHeldOffForASilentReplica(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("canary-silent")
	logA := &syncBuffer{}
	xdsA, admA, _ := startServeLogged(t, logA, "--store", url)
	_, admB, stopB := startStoppableServe(t, "--store", url)
	dir := t.TempDir()
	file := func(tag string) string { return writeFile(t, dir, "c.yaml", cl+"name: c\nalt_stat_name: "+tag+"\n") }
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "--client", "none", "-f", file("v1")); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xdsA, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in, out := newCDSWatch(t, conn, nodeIn(true)), newCDSWatch(t, conn, nodeIn(false))
	in.wait(t, "v1")
	out.wait(t, "v1")

	stopB() // B's lease keeps it listed for up to etcd.ReplicaTTL
	if code, stdout, errOut := runCmd(t, "apply", "--admin", admA, "--client", "none", "--canary", "25%", "--bake", "1s", "-f", file("v2")); code != 0 {
		t.Fatalf("apply --canary --bake through A while B is down: exit %d\n%s%s", code, stdout, errOut)
	}
	staged := listResources(t, admA, "").Revision
	in.wait(t, "v2") // and ACKs it
	heldFor := "replica " + admB + " did not answer about its canary clients"
	var rep rollout.Report
	testutil.Eventually(t, "A to hold off the promote for B", func() bool {
		in.last()
		rep, err = fetchRollout(&adminClient{addr: admA}, staged, 0)
		return err == nil && rep.Stage != nil && rep.Stage.HeldOff != ""
	})
	if !strings.Contains(rep.Stage.HeldOff, heldFor) || rep.Stage.State != store.StateStaged ||
		len(rep.Unreachable) != 1 || rep.Unreachable[0].Replica != admB {
		t.Errorf("GET /v1/rollout of the revision held off for B: stage %+v, unreachable %+v", rep.Stage, rep.Unreachable)
	}
	if code, stdout, errOut := runCmd(t, "status", "--admin", admA); code != 0 ||
		!strings.Contains(stdout, "the server holds off promoting it: "+heldFor) || !strings.Contains(errOut, admB) {
		t.Errorf("status of the revision held off for B: exit %d\n%s%s", code, stdout, errOut)
	}
	if got := out.last(); got != "v1" {
		t.Fatalf("outside the canary while held off: %s, want v1", got)
	}
	// B's lease ends: A promotes, judging by the replicas left.
	testutil.Eventually(t, "A to promote once B's lease ends", func() bool {
		in.last()
		return out.last() == "v2"
	})
	rep, err = fetchRollout(&adminClient{addr: admA}, staged, 0)
	if err != nil || rep.Stage == nil || rep.Stage.State != store.StatePromoted || !strings.Contains(rep.Stage.Reason, "bake of 1s passed") || len(rep.Unreachable) != 0 {
		t.Errorf("GET /v1/rollout once promoted: %+v %+v %v", rep.Stage, rep.Unreachable, err)
	}
	logA.mu.Lock()
	defer logA.mu.Unlock()
	if !strings.Contains(logA.b.String(), heldFor) {
		t.Errorf("A's log does not say why it held off:\n%s", logA.b.String())
	}
}
