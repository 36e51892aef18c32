package protocol_test

import (
	"context"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/resource"
)

// csdsView is what a CSDS response says of one client: resource name →
// client status and version.
type csdsView map[string]struct {
	status  adminv3.ClientResourceStatus
	version string
	err     string
	payload bool
}

func fetchCSDS(t *testing.T, h *harness, req *statusv3.ClientStatusRequest) map[string]csdsView {
	t.Helper()
	resp, err := statusv3.NewClientStatusDiscoveryServiceClient(h.conn).FetchClientStatus(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]csdsView{}
	for _, cc := range resp.GetConfig() {
		v := csdsView{}
		for _, g := range cc.GetGenericXdsConfigs() {
			v[g.GetName()] = struct {
				status  adminv3.ClientResourceStatus
				version string
				err     string
				payload bool
			}{g.GetClientStatus(), g.GetVersionInfo(), g.GetErrorState().GetDetails(), g.GetXdsConfig() != nil}
		}
		out[cc.GetNode().GetId()] = v
	}
	return out
}

// CSDS lists every connected client with the status of each resource it
// asked for: ACKED with the variant it holds, NACKED with the client's
// error, REQUESTED for a name not sent yet, DOES_NOT_EXIST for one it was
// told is absent.
func TestCSDSListsClientsWithStatuses(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "env=prod", "prod"), route("r", "env=test", "test"))

	acker := h.sotw(node("acker", map[string]string{"env": "prod"}))
	acker.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r", "missing"}})
	r := acker.Recv()
	acker.Ack(r, "r", "missing")
	acker.Barrier(h.putSecret)

	nacker := h.delta(node("nacker", map[string]string{"env": "test"}))
	nacker.Sub(resource.RouteURL, "r", "gone")
	d := nacker.Recv()
	nacker.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResponseNonce: d.Nonce,
		ErrorDetail: &status.Status{Code: 13, Message: "cluster test unknown"}})
	nacker.Barrier(h.putSecret)

	got := fetchCSDS(t, h, &statusv3.ClientStatusRequest{})
	if len(got) != 2 {
		t.Fatalf("CSDS listed %d clients, want 2: %v", len(got), got)
	}
	a := got["acker"]
	if a["r"].status != adminv3.ClientResourceStatus_ACKED || a["r"].version == "" || !a["r"].payload {
		t.Errorf("acker r: %+v, want ACKED with its version and payload", a["r"])
	}
	if a["missing"].status != adminv3.ClientResourceStatus_REQUESTED {
		t.Errorf("acker missing: %+v, want REQUESTED", a["missing"])
	}
	n := got["nacker"]
	if n["r"].status != adminv3.ClientResourceStatus_NACKED || n["r"].err != "cluster test unknown" {
		t.Errorf("nacker r: %+v, want NACKED with the client's error", n["r"])
	}
	if n["gone"].status != adminv3.ClientResourceStatus_DOES_NOT_EXIST {
		t.Errorf("nacker gone: %+v, want DOES_NOT_EXIST", n["gone"])
	}

	// Filtered by node id, over the streaming method too.
	only := &statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{{NodeId: &matcherv3.StringMatcher{
		MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "ack"}}}}}
	if got := fetchCSDS(t, h, only); len(got) != 1 || got["acker"] == nil {
		t.Errorf("node_id prefix ack: %v", got)
	}
	st, err := statusv3.NewClientStatusDiscoveryServiceClient(h.conn).StreamClientStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(only); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil || len(resp.GetConfig()) != 1 || resp.GetConfig()[0].GetNode().GetId() != "acker" {
		t.Fatalf("stream: %v, %v", resp, err)
	}
	st.CloseSend()

	// Matching on metadata is refused, not ignored.
	_, err = statusv3.NewClientStatusDiscoveryServiceClient(h.conn).FetchClientStatus(context.Background(),
		&statusv3.ClientStatusRequest{NodeMatchers: []*matcherv3.NodeMatcher{{NodeMetadatas: []*matcherv3.StructMatcher{{}}}}})
	if grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("metadata matcher: %v, want InvalidArgument", err)
	}
}
