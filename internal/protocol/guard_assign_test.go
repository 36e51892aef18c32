package protocol_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// mtlsHarness is a protocol server under a policy, served with mTLS, and
// a connection per client identity.
type mtlsHarness struct {
	*harness
	conn func(identity string) *grpc.ClientConn
}

func newMTLSHarness(t *testing.T, policySrc string) *mtlsHarness {
	ca := testpki.NewCA(t, "ca")
	srvCert := ca.Leaf(t, testpki.LeafOpts{Server: true})
	d := db.New(db.Hooks{})
	ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Guard: mustPolicy(t, policySrc)})
	g := grpc.NewServer(protocol.ServerCodec(), grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{srvCert.TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert})))
	ps.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conns := map[string]*grpc.ClientConn{}
	return &mtlsHarness{harness: &harness{t: t, db: d, srv: ps}, conn: func(id string) *grpc.ClientConn {
		if c := conns[id]; c != nil {
			return c
		}
		c, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Leaf(t, testpki.LeafOpts{URI: id}).TLS}})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[id] = c
		return c
	}}
}

// routeTarget is the cluster the only route of a SotW RDS response routes
// to: which variant the client was sent.
func routeTarget(t *testing.T, r *discoveryv3.DiscoveryResponse) string {
	t.Helper()
	if len(r.Resources) != 1 {
		t.Fatalf("want one route, got %d", len(r.Resources))
	}
	var rc routev3.RouteConfiguration
	if err := r.Resources[0].UnmarshalTo(&rc); err != nil {
		t.Fatal(err)
	}
	return rc.GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetCluster()
}

const (
	testID = "spiffe://t/ns/test/sa/web"
	prodID = "spiffe://t/ns/prod/sa/web"
	opsID  = "spiffe://t/ns/ops/sa/admin"
)

const assignPolicy = `rules:
- clients: ["spiffe://t/ns/test/*"]
  assign: {env: test}
- clients: ["spiffe://t/ns/test/*", "spiffe://t/ns/prod/*"]
  types: [rds, sds]
- clients: ["spiffe://t/ns/ops/*"]
  csds: all
`

// Issue 27 point 3, the attack: variants env=test and env!=test, and a
// test identity that omits env. TP2's != matches a client that sends no
// value, so before assign it got production's variant. Now the policy
// assigns env=test: it gets the test variant however it asks (no node,
// node metadata without env, a locator without env), and claiming
// another value ends the stream.
func TestAssignedParams(t *testing.T) {
	h := newMTLSHarness(t, assignPolicy)
	h.put(route("r", "env=test", "test-backend"), route("r", "env!=test", "prod-backend"))

	for _, tc := range []struct {
		what string
		meta map[string]string // nil: no node at all
	}{
		{"no node", nil},
		{"node metadata without env", map[string]string{"region": "eu"}},
		{"node metadata claiming env=test", map[string]string{"env": "test"}},
	} {
		var s *protocoltest.SotW
		if tc.meta == nil {
			s = protocoltest.NewSotW(t, h.conn(testID), nil)
		} else {
			s = protocoltest.NewSotW(t, h.conn(testID), node(tc.what, tc.meta))
		}
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
		if got := routeTarget(t, s.Recv()); got != "test-backend" {
			t.Errorf("test identity, %s: sent the variant for %s", tc.what, got)
		}
		s.Close()
	}
	// The identity without an assignment still gets the != variant.
	p := protocoltest.NewSotW(t, h.conn(prodID), node("prod", nil))
	p.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	if got := routeTarget(t, p.Recv()); got != "prod-backend" {
		t.Errorf("prod identity: sent the variant for %s", got)
	}

	// A delta locator without env is answered with the assigned value's
	// variant.
	d := protocoltest.NewDelta(t, h.conn(testID), node("delta", nil))
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL,
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{{Name: "r", DynamicParameters: map[string]string{"region": "eu"}}}})
	if got := describe(d.Recv()); got != "route.v3.RouteConfiguration: r [env=test]" {
		t.Errorf("locator without env: %s", got)
	}

	// A claim of another value, in node metadata or a locator, is refused.
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PERMISSION_DENIED", what, err)
		}
	}
	bad := protocoltest.NewSotW(t, h.conn(testID), node("liar", map[string]string{"env": "prod"}))
	bad.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
	refused("node metadata env=prod", <-bad.Errs)
	badLoc := protocoltest.NewDelta(t, h.conn(testID), nil)
	badLoc.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL,
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{{Name: "r", DynamicParameters: map[string]string{"env": "prod"}}}})
	refused("locator env=prod", <-badLoc.Errs)

	// /v1/clients (and CSDS) show the parameters the client is served
	// with.
	for _, c := range h.srv.Streams() {
		if c.Identity == testID && c.Params["env"] != "test" {
			t.Errorf("client %s: node params %v, want env=test", c.NodeID, c.Params)
		}
	}
}

// Issue 27 point 6, the attack: any caller's CSDS listed every connected
// client's node id and metadata. Under a policy, a caller now sees only
// the clients of its own identity, unless the policy grants it csds: all.
func TestCSDSScopedByIdentity(t *testing.T) {
	h := newMTLSHarness(t, assignPolicy)
	h.put(route("r", "", "c"))
	for _, id := range []string{testID, prodID} {
		s := protocoltest.NewSotW(t, h.conn(id), node("node-of-"+id, map[string]string{"secret-meta": id}))
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
		s.Recv()
	}
	nodes := func(caller string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		resp, err := statusv3.NewClientStatusDiscoveryServiceClient(h.conn(caller)).FetchClientStatus(ctx, &statusv3.ClientStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cc := range resp.GetConfig() {
			out = append(out, cc.GetNode().GetId())
		}
		slices.Sort(out)
		return out
	}
	if got := nodes(testID); !slices.Equal(got, []string{"node-of-" + testID}) {
		t.Errorf("test identity sees %v, want only its own node", got)
	}
	if got := nodes("spiffe://t/ns/other/x"); len(got) != 0 {
		t.Errorf("an identity with no client sees %v", got)
	}
	if got := nodes(opsID); !slices.Equal(got, []string{"node-of-" + prodID, "node-of-" + testID}) {
		t.Errorf("csds: all sees %v, want every node", got)
	}
	// The streaming form is scoped alike.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := statusv3.NewClientStatusDiscoveryServiceClient(h.conn(prodID)).StreamClientStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&statusv3.ClientStatusRequest{}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetConfig()) != 1 || resp.GetConfig()[0].GetNode().GetId() != "node-of-"+prodID {
		t.Errorf("stream: %v", resp)
	}
}
