package origin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// CanaryNodes returns n node ids in a 25% canary and m outside it,
// chosen with the function the server uses (canary.Bucket).
func canaryNodes(n, m int) (in, out []string) {
	for i := 0; len(in) < n || len(out) < m; i++ {
		id := fmt.Sprintf("node-%d", i)
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

// seen is what one SotW stream was sent of cluster c: each response's
// version and the cluster's alt_stat_name (its tag). It is read, and the
// responses ACKed, on the test's goroutine (drain).
type seen struct {
	tags []string
	vers []string
	c    *protocoltest.SotW
}

// drain records and ACKs every response that has arrived.
func (s *seen) drain() {
	for {
		select {
		case r := <-s.c.Resps:
			for _, a := range r.Resources {
				var cl clusterv3.Cluster
				if proto.Unmarshal(a.Value, &cl) == nil {
					s.tags = append(s.tags, cl.AltStatName)
					s.vers = append(s.vers, r.VersionInfo)
				}
			}
			s.c.Ack(r, "c")
		default:
			return
		}
	}
}

func (s *seen) last() (string, string) {
	s.drain()
	if len(s.tags) == 0 {
		return "", ""
	}
	return s.tags[len(s.tags)-1], s.vers[len(s.vers)-1]
}

// follow subscribes a SotW stream of node id to cluster c.
func follow(t *testing.T, conn *grpc.ClientConn, id string) *seen {
	c := protocoltest.NewSotW(t, conn, protocoltest.Node(id, nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
	return &seen{c: c}
}

func waitTag(t *testing.T, ss []*seen, tag string) {
	t.Helper()
	for _, s := range ss {
		testutil.Eventually(t, "a stream to be sent "+tag, func() bool { got, _ := s.last(); return got == tag })
	}
}

func stageBatch(o *testorigin.Origin, tag, spec string) store.Batch {
	b := store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "", tag)}, IfRev: o.St.Rev(),
		Audit: store.Audit{Via: "apply --canary " + spec, Stage: &store.Stage{State: store.StateStaged, Canary: spec}}}
	store.MarkStage(&b)
	return b
}

// A revision staged for 25% reaches only the streams whose node ids are
// in the canary; the others keep their variant and version, across a
// restart; a promote reaches them; an abort puts the canary back on what
// it had; outside streams never see what was aborted.
func TestStagedRevisionServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := testorigin.Start(t)
	o.Commit(store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "", "v1")}})
	conn, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inIDs, outIDs := canaryNodes(2, 3)
	var in, out []*seen
	for _, id := range inIDs {
		in = append(in, follow(t, conn, id))
	}
	for _, id := range outIDs {
		out = append(out, follow(t, conn, id))
	}
	waitTag(t, append(in, out...), "v1")
	_, v1 := out[0].last()

	o.Commit(stageBatch(o, "v2", "25%"))
	staged := o.St.Rev()
	waitTag(t, in, "v2")
	for _, s := range out {
		if tag, ver := s.last(); tag != "v1" || ver != v1 {
			t.Fatalf("outside the canary: %s at %s, want v1 at %s", tag, ver, v1)
		}
	}
	if rec, ok := o.Srv.StagedRevision(); !ok || rec.Rev != staged {
		t.Fatalf("StagedRevision: %v %v, want %d", rec.Rev, ok, staged)
	}

	// A restart keeps the stage: the canary streams reconnect to v2, the
	// others to v1.
	for _, s := range out {
		s.drain()
	}
	o.Stop()
	o.Start()
	conn2, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	var in2, out2 []*seen
	for _, id := range inIDs {
		in2 = append(in2, follow(t, conn2, id))
	}
	for _, id := range outIDs {
		out2 = append(out2, follow(t, conn2, id))
	}
	waitTag(t, in2, "v2")
	waitTag(t, out2, "v1")

	// Promote: everyone on v2, at the promote's version.
	for _, s := range out2 {
		s.drain()
		for _, tag := range s.tags {
			if tag != "v1" {
				t.Fatalf("outside the canary, before the promote: sent %v", s.tags)
			}
		}
	}
	rec, _ := o.Srv.StagedRevision()
	b, err := store.PromoteBatch(ctx, o.St, rec, store.Audit{Via: "test promote", Stage: &store.Stage{State: store.StatePromoted, Of: rec.Rev}})
	if err != nil {
		t.Fatal(err)
	}
	o.Commit(b)
	waitTag(t, append(in2, out2...), "v2")
	for _, s := range out2 {
		if _, ver := s.last(); ver != fmt.Sprint(o.St.Rev()) {
			t.Errorf("after the promote: version %s, want %d", ver, o.St.Rev())
		}
	}
	if _, ok := o.Srv.StagedRevision(); ok {
		t.Error("still staged after the promote")
	}

	// Stage v3 and abort it: the canary goes back to v2, the others
	// never see v3.
	o.Commit(stageBatch(o, "v3", "25%"))
	waitTag(t, in2, "v3")
	rec, _ = o.Srv.StagedRevision()
	b, err = store.AbortBatch(ctx, o.St, rec, store.Audit{Via: "test abort", Stage: &store.Stage{State: store.StateAborted, Of: rec.Rev}})
	if err != nil {
		t.Fatal(err)
	}
	o.Commit(b)
	waitTag(t, append(in2, out2...), "v2")
	for _, s := range append(out, out2...) {
		for _, tag := range s.tags {
			if tag == "v3" {
				t.Errorf("a stream outside the canary was sent the aborted v3: %v", s.tags)
			}
		}
	}
	for _, s := range out {
		for _, tag := range s.tags {
			if tag == "v2" {
				t.Errorf("a stream outside the canary was sent v2 before the promote: %v", s.tags)
			}
		}
	}
}

// A param= canary chooses by the subscription's parameter set (here, the
// node metadata of clients that send no dynamic parameters), and a TP2
// variant the revision did not change keeps its version for everyone.
func TestStagedRevisionByParams(t *testing.T) {
	o := testorigin.Start(t)
	o.Commit(store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "env=prod", "p1"), storetest.Cluster("c", "env=test", "t1")}})
	conn, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch := func(id, env, region string) *seen {
		c := protocoltest.NewSotW(t, conn, protocoltest.Node(id, map[string]string{"env": env, "region": region}))
		c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
		return &seen{c: c}
	}
	eu, us, test := watch("a", "prod", "eu"), watch("b", "prod", "us"), watch("c", "test", "eu")
	waitTag(t, []*seen{eu, us}, "p1")
	waitTag(t, []*seen{test}, "t1")
	_, testVer := test.last()
	b := store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "env=prod", "p2"), storetest.Cluster("c", "env=test", "t1")}, IfRev: o.St.Rev(),
		Audit: store.Audit{Stage: &store.Stage{State: store.StateStaged, Canary: "env=prod,region=eu"}}}
	store.MarkStage(&b)
	o.Commit(b)
	waitTag(t, []*seen{eu}, "p2")
	if tag, _ := us.last(); tag != "p1" {
		t.Errorf("env=prod region=us, outside the canary: %s", tag)
	}
	if tag, ver := test.last(); tag != "t1" || ver != testVer {
		t.Errorf("env=test, whose variant did not change: %s at %s, want t1 at %s", tag, ver, testVer)
	}
}

// A bake survives a restart: the mark holds its start and length, and
// the restarted server promotes the revision once a canary client ACKs
// it; a canary NACK with abort-on-NACK has the server abort it.
func TestStagedRevisionBakeAndAbortOnNack(t *testing.T) {
	o := testorigin.Start(t)
	o.Commit(store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "", "v1")}})
	stage := stageBatch(o, "v2", "25%")
	stage.Audit.Stage.Bake = store.Duration(time.Second)
	o.Commit(stage)
	staged := o.St.Rev()
	o.Stop()
	o.Start()
	conn, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inIDs, outIDs := canaryNodes(1, 1)
	in, out := follow(t, conn, inIDs[0]), follow(t, conn, outIDs[0])
	waitTag(t, []*seen{in}, "v2")
	waitTag(t, []*seen{out}, "v2") // promoted by the restarted server
	rec, ok, err := store.RecordAt(context.Background(), o.St, staged+1)
	if err != nil || !ok || rec.Audit.Stage == nil || rec.Audit.Stage.State != store.StatePromoted || !strings.Contains(rec.Audit.Stage.Reason, "bake of 1s passed") {
		t.Fatalf("the revision after the staged one: %+v %v %v", rec.Audit, ok, err)
	}

	// Abort on NACK: the canary NACKs v3, the server aborts it.
	stage = stageBatch(o, "v3", "25%")
	stage.Audit.Stage.AbortOnNack = true
	o.Commit(stage)
	staged = o.St.Rev()
	var r *discoveryv3.DiscoveryResponse
	testutil.Eventually(t, "the canary to be sent v3", func() bool {
		select {
		case r = <-in.c.Resps:
			var cl clusterv3.Cluster
			if len(r.Resources) == 1 && proto.Unmarshal(r.Resources[0].Value, &cl) == nil && cl.AltStatName == "v3" {
				return true
			}
			in.c.Ack(r, "c")
			return false
		default:
			return false
		}
	})
	in.c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "v3 refused"}})
	testutil.Eventually(t, "the server to abort the NACKed revision", func() bool { return o.St.Rev() > staged })
	in.tags = nil
	waitTag(t, []*seen{in}, "v2")
	rec, ok, err = store.RecordAt(context.Background(), o.St, staged+1)
	if err != nil || !ok || rec.Audit.Stage == nil || rec.Audit.Stage.State != store.StateAborted || !strings.Contains(rec.Audit.Stage.Reason, "v3 refused") {
		t.Fatalf("the revision after the NACKed one: %+v %v %v", rec.Audit, ok, err)
	}
	for _, tag := range out.tags {
		if tag == "v3" {
			t.Errorf("outside the canary, sent the aborted v3: %v", out.tags)
		}
	}
}

// Why a baked revision is not promoted is known beside the log
// (StageHold, reported by GET /v1/rollout): no canary client ACKed it
// yet, then a canary client NACKed it; once promoted or aborted, nothing
// holds it.
func TestStagedRevisionHoldOffReason(t *testing.T) {
	o := testorigin.Start(t)
	o.Commit(store.Batch{Puts: []*resource.Variant{storetest.Cluster("c", "", "v1")}})
	conn, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inIDs, _ := canaryNodes(1, 0)
	in := follow(t, conn, inIDs[0])
	waitTag(t, []*seen{in}, "v1")
	stage := stageBatch(o, "v2", "25%")
	stage.Audit.Stage.Bake = store.Duration(time.Second)
	o.Commit(stage)
	staged := o.St.Rev()
	// The canary is sent v2 and says nothing.
	var r *discoveryv3.DiscoveryResponse
	select {
	case r = <-in.c.Resps:
	case <-time.After(testutil.Wait):
		t.Fatal("the canary was not sent the staged revision")
	}
	if o.Srv.StageHold(staged) != "" {
		t.Errorf("held off before the bake is over: %q", o.Srv.StageHold(staged))
	}
	testutil.Eventually(t, "the hold for want of an ACK", func() bool {
		return strings.Contains(o.Srv.StageHold(staged), "no canary client has ACKed it yet")
	})
	in.c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}, ResponseNonce: r.Nonce,
		ErrorDetail: &status.Status{Code: 3, Message: "v2 refused"}})
	testutil.Eventually(t, "the hold for the NACK", func() bool {
		h := o.Srv.StageHold(staged)
		return strings.Contains(h, "a canary client NACKed it: "+inIDs[0]) && strings.Contains(h, "v2 refused") &&
			strings.Contains(h, fmt.Sprintf("xdsd rollout abort %d", staged))
	})
	if o.St.Rev() != staged {
		t.Fatalf("a NACKed revision was closed by the server: the store is at %d", o.St.Rev())
	}
	rec, _ := o.Srv.StagedRevision()
	b, err := store.AbortBatch(context.Background(), o.St, rec, store.Audit{Stage: &store.Stage{State: store.StateAborted, Of: staged, Canary: "25%"}})
	if err != nil {
		t.Fatal(err)
	}
	o.Commit(b)
	testutil.Eventually(t, "the stage to end", func() bool { _, ok := o.Srv.StagedRevision(); return !ok })
	if h := o.Srv.StageHold(staged); h != "" {
		t.Errorf("held off after the abort: %q", h)
	}
}
