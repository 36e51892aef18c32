package protocol_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/xdsd/xdsd/db"
	"github.com/xdsd/xdsd/protocol"
	"github.com/xdsd/xdsd/resource"
)

const wait = 10 * time.Second

// harness is a real protocol server on loopback fed from a db, and a client
// connection to it.
type harness struct {
	t    *testing.T
	db   *db.DB
	srv  *protocol.Server
	conn *grpc.ClientConn
}

func newHarness(t *testing.T, opts ...func(*protocol.Options)) *harness {
	t.Helper()
	d := db.New(db.Hooks{})
	o := protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	ps := protocol.NewServer(d, o)
	g := grpc.NewServer(protocol.ServerCodec())
	ps.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
	})
	return &harness{t: t, db: d, srv: ps, conn: conn}
}

// docs decodes authoring YAML into variants.
func docs(t *testing.T, src string) []*resource.Variant {
	t.Helper()
	ds, err := resource.Decode("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*resource.Variant, len(ds))
	for i, d := range ds {
		out[i] = d.Variant
	}
	return out
}

var rev int64

// put stores variants in one update, each versioned by the update.
func (h *harness) put(vs ...*resource.Variant) {
	rev++
	stamped := make([]*resource.Variant, len(vs))
	for i, v := range vs {
		stamped[i] = v.WithVersion(fmt.Sprint(rev))
	}
	h.db.Update(db.Update{Rev: rev, Puts: stamped})
}

func (h *harness) update(u db.Update) {
	rev++
	u.Rev = rev
	for i, v := range u.Puts {
		u.Puts[i] = v.WithVersion(fmt.Sprint(rev))
	}
	h.db.Update(u)
}

func (h *harness) remove(typeURL string, names ...string) {
	var u db.Update
	for _, n := range names {
		u.Removes = append(u.Removes, [2]string{typeURL, n})
	}
	h.update(u)
}

func cluster(n string) *resource.Variant {
	return clusterTagged(n, "")
}

func clusterTagged(n, tag string) *resource.Variant {
	return variant(resource.ClusterURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.cluster.v3.Cluster", "name": %q, "alt_stat_name": %q}`, n, tag))
}

func route(n, cons, cluster string) *resource.Variant {
	return variant(resource.RouteURL, n, cons, fmt.Sprintf(`{"@type": "envoy.config.route.v3.RouteConfiguration", "name": %q,
		"virtual_hosts": [{"name": "vh", "domains": ["*"], "routes": [{"match": {"prefix": ""}, "route": {"cluster": %q}}]}]}`, n, cluster))
}

func secret(n string) *resource.Variant {
	return variant(resource.SecretURL, n, "", fmt.Sprintf(`{"@type": "envoy.extensions.transport_sockets.tls.v3.Secret", "name": %q}`, n))
}

func variant(typeURL, n, cons, payload string) *resource.Variant {
	ds, err := resource.Decode("t.json", []byte(fmt.Sprintf(`{"name": %q, "type": %q, "constraints": %q, "resource": %s}`, n, typeURL, cons, payload)))
	if err != nil {
		panic(err)
	}
	return ds[0].Variant
}

func node(id string, meta map[string]string, features ...string) *corev3.Node {
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

// sotw is a SotW ADS stream under test; responses are read in the
// background so a test can wait for one with a deadline.
type sotw struct {
	t           *testing.T
	s           discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	resps       chan *discoveryv3.DiscoveryResponse
	errs        chan error
	firstNode   *corev3.Node
	barrierN    int
	secretNonce string
}

func (h *harness) sotw(n *corev3.Node) *sotw {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(h.conn).StreamAggregatedResources(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	c := &sotw{t: h.t, s: s, resps: make(chan *discoveryv3.DiscoveryResponse, 100), errs: make(chan error, 1)}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.resps <- r
		}
	}()
	if n != nil {
		c.firstNode = n
	}
	return c
}

func (c *sotw) send(r *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	if c.firstNode != nil {
		r.Node, c.firstNode = c.firstNode, nil
	}
	if err := c.s.Send(r); err != nil {
		c.t.Fatal(err)
	}
}

func (c *sotw) recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		checkSotW(c.t, r)
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(wait):
		c.t.Fatal("no response")
	}
	return nil
}

// ack acknowledges r with the given names.
func (c *sotw) ack(r *discoveryv3.DiscoveryResponse, names ...string) {
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce, ResourceNames: names})
}

// barrier proves nothing else is on its way: it subscribes a secret, and
// the next response must be that secret's. The harness must hold "barrier".
func (c *sotw) barrier(h *harness) {
	c.t.Helper()
	c.barrierN++
	n := fmt.Sprintf("barrier-%d", c.barrierN)
	h.put(secret(n))
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretURL, ResourceNames: []string{n}, ResponseNonce: c.secretNonce})
	r := c.recv()
	if r.TypeUrl != resource.SecretURL || len(r.Resources) != 1 {
		c.t.Fatalf("expected only the barrier, got a %s response with %v", r.TypeUrl, sotwNames(c.t, r))
	}
	c.secretNonce = r.Nonce
}

// sotwNames lists the names of a SotW response's resources (unwrapping
// discovery Resources), with constraints in brackets.
func sotwNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.Resources {
		if a.TypeUrl == resource.WrapperURL {
			var res discoveryv3.Resource
			if err := a.UnmarshalTo(&res); err != nil {
				t.Fatal(err)
			}
			out = append(out, resName(&res))
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

func resName(r *discoveryv3.Resource) string {
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

// delta is a delta ADS stream under test.
type delta struct {
	t     *testing.T
	s     discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	resps chan *discoveryv3.DeltaDiscoveryResponse
	errs  chan error
	node  *corev3.Node
	nth   int
}

func (h *harness) delta(n *corev3.Node) *delta {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(h.conn).DeltaAggregatedResources(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	c := &delta{t: h.t, s: s, resps: make(chan *discoveryv3.DeltaDiscoveryResponse, 100), errs: make(chan error, 1), node: n}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				c.errs <- err
				return
			}
			c.resps <- r
		}
	}()
	return c
}

func (c *delta) send(r *discoveryv3.DeltaDiscoveryRequest) {
	c.t.Helper()
	if c.node != nil {
		r.Node, c.node = c.node, nil
	}
	if err := c.s.Send(r); err != nil {
		c.t.Fatal(err)
	}
}

func (c *delta) sub(typeURL string, names ...string) {
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: names})
}

func (c *delta) recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	select {
	case r := <-c.resps:
		checkDelta(c.t, r)
		return r
	case err := <-c.errs:
		c.t.Fatalf("stream ended: %v", err)
	case <-time.After(wait):
		c.t.Fatal("no response")
	}
	return nil
}

func (c *delta) ack(r *discoveryv3.DeltaDiscoveryResponse) {
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
}

// barrier proves nothing else is on its way (see sotw.barrier).
func (c *delta) barrier(h *harness) {
	c.t.Helper()
	c.nth++
	n := fmt.Sprintf("barrier-%d", c.nth)
	h.put(secret(n))
	c.sub(resource.SecretURL, n)
	for {
		r := c.recv()
		if r.TypeUrl == resource.SecretURL && len(r.Resources) == 0 && len(r.RemovedResources) == 0 {
			continue // the first response of a new type may be empty
		}
		if r.TypeUrl != resource.SecretURL || len(r.Resources) != 1 || r.Resources[0].Name != n {
			c.t.Fatalf("expected only the barrier, got %s", describe(r))
		}
		return
	}
}

// describe summarizes a delta response: resources (name@version, with
// constraints and aliases) and removals.
func describe(r *discoveryv3.DeltaDiscoveryResponse) string {
	var parts []string
	for _, res := range r.Resources {
		s := resName(res)
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

func dbUpdate(puts []*resource.Variant, removes [][2]string) db.Update {
	return db.Update{Puts: puts, Removes: removes}
}

// checkSotW fails the test on a response a client would NACK (PROTOCOL.md
// §1.7, §2.6): a resource of another type, or a name given twice (the same
// name twice is fine only as distinct TP2 variants).
func checkSotW(t *testing.T, r *discoveryv3.DiscoveryResponse) {
	t.Helper()
	seen := map[string]bool{}
	for i, a := range r.Resources {
		if a.TypeUrl != r.TypeUrl && a.TypeUrl != resource.WrapperURL {
			t.Fatalf("resource %d is a %s in a %s response", i, a.TypeUrl, r.TypeUrl)
		}
	}
	for _, n := range sotwNames(t, r) {
		if seen[n] {
			t.Fatalf("%s given twice in one response", n)
		}
		seen[n] = true
	}
}

// checkDelta fails the test on a delta response Envoy would NACK
// (PROTOCOL.md §2.6): a name repeated across resources and removals, or a
// payload of another type, or a payload-less resource that is not a VHDS
// answer carrying aliases.
func checkDelta(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	seen := map[string]bool{}
	use := func(n string) {
		if seen[n] {
			t.Fatalf("%s appears twice in one response: %s", n, describe(r))
		}
		seen[n] = true
	}
	for _, res := range r.Resources {
		use(resName(res))
		switch {
		case res.Resource == nil && len(res.Aliases) == 0:
			t.Fatalf("payload-less resource %s without aliases", resName(res))
		case res.Resource != nil && res.Resource.TypeUrl != r.TypeUrl && res.Resource.TypeUrl != resource.LocatorURL:
			t.Fatalf("%s is a %s in a %s response", resName(res), res.Resource.TypeUrl, r.TypeUrl)
		case res.Name != "" && res.ResourceName != nil:
			t.Fatalf("%s has both name and resource_name", resName(res))
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
