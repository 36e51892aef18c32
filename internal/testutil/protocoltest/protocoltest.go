// Package protocoltest drives real downstream xDS streams in tests: SotW
// and delta ADS clients with deadlines, barriers that prove nothing else is
// on its way, and checks that every response is one a real client would
// accept. Only tests import it.
package protocoltest

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

// Wait bounds every wait: testutil.Wait, generous on purpose. Every wait
// is for a response that is on its way, so the deadline only turns a hang
// into a failure; 10 s was reached under load (a delta request of 99,000
// names answered under -race beside a full test run).
const Wait = testutil.Wait

// Node builds a node with string metadata and client features.
func Node(id string, meta map[string]string, features ...string) *corev3.Node {
	n := &corev3.Node{Id: id, ClientFeatures: features}
	if len(meta) > 0 {
		fields := map[string]any{}
		for k, v := range meta {
			fields[k] = v
		}
		s, _ := structpb.NewStruct(fields)
		n.Metadata = s
	}
	return n
}

// Serve serves the services register adds on a loopback port, with xdsd's
// codec, until the test ends; it returns the address and a connection.
func Serve(t testing.TB, register func(*grpc.Server)) (addr string, conn *grpc.ClientConn) {
	t.Helper()
	return ServeWith(t, register)
}

// ServeWith is Serve on a gRPC server with more options (credentials).
func ServeWith(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) (addr string, conn *grpc.ClientConn) {
	t.Helper()
	g := grpc.NewServer(append(protocol.ServerOptions(), opts...)...)
	register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		g.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
	})
	return lis.Addr().String(), conn
}

// pump reads a stream's responses in the background, until it ends.
func pump[R any](recv func() (R, error)) (chan R, chan error) {
	resps, errs := make(chan R, 100), make(chan error, 1)
	go func() {
		for {
			r, err := recv()
			if err != nil {
				errs <- err
				return
			}
			resps <- r
		}
	}()
	return resps, errs
}

// await waits, with a deadline, for the next response, and checks it.
func await[R any](t testing.TB, resps <-chan R, errs <-chan error, check func(testing.TB, R)) R {
	t.Helper()
	select {
	case r := <-resps:
		check(t, r)
		return r
	case err := <-errs:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(Wait):
		t.Fatal("no response")
	}
	var zero R
	return zero
}

// SotW is a SotW ADS stream under test; responses are read in the
// background so a test can wait for one with a deadline.
type SotW struct {
	t           testing.TB
	s           discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	Resps       chan *discoveryv3.DiscoveryResponse
	Errs        chan error
	firstNode   *corev3.Node
	barrierN    int
	secretNonce string
	cancel      context.CancelFunc
}

// Close ends the stream (the client goes away).
func (c *SotW) Close() { c.cancel() }

// NewSotW opens a SotW ADS stream on conn; n goes on its first request.
func NewSotW(t testing.TB, conn *grpc.ClientConn, n *corev3.Node) *SotW {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &SotW{t: t, s: s, cancel: cancel}
	c.Resps, c.Errs = pump(s.Recv)
	if n != nil {
		c.firstNode = n
	}
	return c
}

// Send sends a request; the stream's node goes on the first.
func (c *SotW) Send(r *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	if c.firstNode != nil {
		r.Node, c.firstNode = c.firstNode, nil
	}
	if err := c.s.Send(r); err != nil {
		c.t.Fatal(err)
	}
}

// Recv waits for the next response, checked with CheckSotW.
func (c *SotW) Recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	return await(c.t, c.Resps, c.Errs, CheckSotW)
}

// Ack acknowledges r with the given names.
func (c *SotW) Ack(r *discoveryv3.DiscoveryResponse, names ...string) {
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: names})
}

// Barrier proves nothing else is on its way: put stores a secret under a
// new name, the stream subscribes it, and the next response must be it.
func (c *SotW) Barrier(put func(name string)) {
	c.t.Helper()
	c.barrierN++
	n := fmt.Sprintf("barrier-%d", c.barrierN)
	put(n)
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretURL, ResourceNames: []string{n}, ResponseNonce: c.secretNonce})
	r := c.Recv()
	if r.TypeUrl != resource.SecretURL || len(r.Resources) != 1 {
		c.t.Fatalf("expected only the barrier, got a %s response with %v", r.TypeUrl, SotWNames(c.t, r))
	}
	c.secretNonce = r.Nonce
}

// SotWNames lists the names of a SotW response's resources (unwrapping
// discovery Resources), with constraints in brackets.
func SotWNames(t testing.TB, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		if a.TypeUrl == resource.WrapperURL {
			var res discoveryv3.Resource
			if err := a.UnmarshalTo(&res); err != nil {
				t.Fatal(err)
			}
			out = append(out, ResName(&res))
			continue
		}
		v := resource.NewVariant(resource.ForURL(a.TypeUrl), "", constraint.Constraints{}, "", a.TypeUrl, a.Value)
		m, err := v.Message()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resource.ForURL(a.TypeUrl).NameOf(m))
	}
	return out
}

// ResName names a discovery Resource, with its constraints in brackets.
func ResName(r *discoveryv3.Resource) string {
	if r.ResourceName != nil {
		c, err := constraint.FromProto(r.ResourceName.DynamicParameterConstraints)
		if err != nil {
			return "bad constraints: " + err.Error()
		}
		if c.IsZero() {
			return r.ResourceName.Name
		}
		return r.ResourceName.Name + " [" + c.String() + "]"
	}
	return r.Name
}

// Delta is a delta ADS stream under test.
type Delta struct {
	t      testing.TB
	s      discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	Resps  chan *discoveryv3.DeltaDiscoveryResponse
	Errs   chan error
	node   *corev3.Node
	nth    int
	cancel context.CancelFunc
}

// Close ends the stream (the client goes away).
func (c *Delta) Close() { c.cancel() }

// NewDelta opens a delta ADS stream on conn; n goes on its first request.
func NewDelta(t testing.TB, conn *grpc.ClientConn, n *corev3.Node) *Delta {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &Delta{t: t, s: s, node: n, cancel: cancel}
	c.Resps, c.Errs = pump(s.Recv)
	return c
}

// CloseSend half-closes the stream: no more requests, responses still
// arrive.
func (c *Delta) CloseSend() {
	c.t.Helper()
	if err := c.s.CloseSend(); err != nil {
		c.t.Fatal(err)
	}
}

// Send sends a request; the stream's node goes on the first.
func (c *Delta) Send(r *discoveryv3.DeltaDiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		r.Node, c.node = c.node, nil
	}
	if err := c.s.Send(r); err != nil {
		c.t.Fatal(err)
	}
}

// Sub subscribes names of a type.
func (c *Delta) Sub(typeURL string, names ...string) {
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

// Recv waits for the next response, checked with CheckDelta.
func (c *Delta) Recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	return await(c.t, c.Resps, c.Errs, CheckDelta)
}

// Ack acknowledges a response.
func (c *Delta) Ack(r *discoveryv3.DeltaDiscoveryResponse) {
	c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
}

// Barrier proves nothing else is on its way (see SotW.Barrier).
func (c *Delta) Barrier(put func(name string)) {
	c.t.Helper()
	c.nth++
	n := fmt.Sprintf("barrier-%d", c.nth)
	put(n)
	c.Sub(resource.SecretURL, n)
	for {
		r := c.Recv()
		if r.TypeUrl == resource.SecretURL && len(r.Resources) == 0 && len(r.RemovedResources) == 0 {
			continue // the first response of a new type may be empty
		}
		if r.TypeUrl != resource.SecretURL || len(r.Resources) != 1 || r.Resources[0].Name != n {
			c.t.Fatalf("expected only the barrier, got %s", Describe(r))
		}
		return
	}
}

// Describe summarizes a delta response: resources (name@version, with
// constraints and aliases) and removals.
func Describe(r *discoveryv3.DeltaDiscoveryResponse) string {
	var parts []string
	for _, res := range r.Resources {
		s := ResName(res)
		if res.Resource == nil {
			s += " (no payload)"
		}
		if len(res.Aliases) > 0 {
			s += " aliases=" + strings.Join(res.Aliases, ",")
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	var rm []string
	for _, n := range r.RemovedResources {
		rm = append(rm, "-"+n)
	}
	for _, n := range r.RemovedResourceNames {
		c, _ := constraint.FromProto(n.DynamicParameterConstraints)
		rm = append(rm, "-"+n.Name+" ["+c.String()+"]")
	}
	sort.Strings(rm)
	return strings.TrimPrefix(resource.ForURL(r.TypeUrl).Name, "envoy.config.") + ": " + strings.Join(append(parts, rm...), " ")
}

// CheckSotW fails the test on a response a client would NACK (docs/protocol.md
// §1.7, §2.6): a resource of another type, or a name given twice (the same
// name twice is fine only as distinct TP2 variants).
func CheckSotW(t testing.TB, r *discoveryv3.DiscoveryResponse) {
	t.Helper()
	seen := map[string]bool{}
	for i, a := range r.Resources {
		if a.TypeUrl != r.TypeUrl && a.TypeUrl != resource.WrapperURL {
			t.Fatalf("resource %d is a %s in a %s response", i, a.TypeUrl, r.TypeUrl)
		}
	}
	for _, n := range SotWNames(t, r) {
		if seen[n] {
			t.Fatalf("%s given twice in one response", n)
		}
		seen[n] = true
	}
}

// CheckDelta fails the test on a delta response Envoy would NACK
// (docs/protocol.md §2.6): a name repeated across resources and removals, or a
// payload of another type, or a payload-less resource that is not a VHDS
// answer carrying aliases.
func CheckDelta(t testing.TB, r *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	seen := map[string]bool{}
	use := func(n string) {
		if seen[n] {
			t.Fatalf("%s appears twice in one response: %s", n, Describe(r))
		}
		seen[n] = true
	}
	for _, res := range r.Resources {
		use(ResName(res))
		switch {
		case res.Resource == nil && len(res.Aliases) == 0 && (res.Ttl == nil || res.Version == ""):
			// Payload-less: a VHDS answer (aliases) or a TTL heartbeat
			// (version and TTL, docs/protocol.md §2.7); Envoy NACKs anything else.
			t.Fatalf("payload-less resource %s is neither a VHDS answer nor a heartbeat", ResName(res))
		case res.Resource != nil && res.Resource.TypeUrl != r.TypeUrl && res.Resource.TypeUrl != resource.LocatorURL:
			t.Fatalf("%s is a %s in a %s response", ResName(res), res.Resource.TypeUrl, r.TypeUrl)
		case res.Name != "" && res.ResourceName != nil:
			t.Fatalf("%s has both name and resource_name", ResName(res))
		}
	}
	for _, n := range r.RemovedResources {
		use(n)
	}
	for _, n := range r.RemovedResourceNames {
		c, _ := constraint.FromProto(n.DynamicParameterConstraints)
		use(n.Name + " [" + c.String() + "]")
	}
}
