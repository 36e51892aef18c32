package client_test

import (
	"net"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/resource"
)

// script is the heart of a scripted ADS server, whose test decides every
// response: it hands over each request and sends what it is given, so a
// test can make a response cross newer requests on the wire.
type script[Req, Resp any] struct {
	reqs chan Req
	resp chan Resp
}

func newScript[Req, Resp any]() script[Req, Resp] {
	return script[Req, Resp]{reqs: make(chan Req, 100), resp: make(chan Resp)}
}

// serve runs one stream: requests to reqs, resp to the stream.
func (s *script[Req, Resp]) serve(recv func() (Req, error), send func(Resp) error) error {
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := recv()
			if err != nil {
				errc <- err
				return
			}
			s.reqs <- req
		}
	}()
	for {
		select {
		case r := <-s.resp:
			if err := send(r); err != nil {
				return err
			}
		case err := <-errc:
			return err
		}
	}
}

// startADS serves an ADS implementation on loopback for the test.
func startADS(t *testing.T, srv discoveryv3.AggregatedDiscoveryServiceServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String()
}

// scriptedADS is a scripted SotW ADS server.
type scriptedADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	script[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse]
}

func startScriptedADS(t *testing.T) (string, *scriptedADS) {
	s := &scriptedADS{script: newScript[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse]()}
	return startADS(t, s), s
}

func (s *scriptedADS) StreamAggregatedResources(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	return s.serve(st.Recv, st.Send)
}

// scriptedDeltaADS is a scripted delta ADS server.
type scriptedDeltaADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	script[*discoveryv3.DeltaDiscoveryRequest, *discoveryv3.DeltaDiscoveryResponse]
}

func startScriptedDeltaADS(t *testing.T) (string, *scriptedDeltaADS) {
	s := &scriptedDeltaADS{script: newScript[*discoveryv3.DeltaDiscoveryRequest, *discoveryv3.DeltaDiscoveryResponse]()}
	return startADS(t, s), s
}

func (s *scriptedDeltaADS) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	return s.serve(st.Recv, st.Send)
}

// await waits for a request for which ok holds, passing over others.
func (s *scriptedDeltaADS) await(t *testing.T, what string, ok func(*discoveryv3.DeltaDiscoveryRequest) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case r := <-s.reqs:
			if ok(r) {
				return
			}
		case <-deadline:
			t.Fatalf("no request %s", what)
		}
	}
}

// send hands the stream a response, failing the test if none takes it.
func (s *scriptedDeltaADS) send(t *testing.T, r *discoveryv3.DeltaDiscoveryResponse) {
	t.Helper()
	select {
	case s.resp <- r:
	case <-time.After(wait):
		t.Fatal("no stream to send on")
	}
}

// request waits for a request naming exactly names.
func (s *scriptedADS) request(t *testing.T, names ...string) *discoveryv3.DiscoveryRequest {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case r := <-s.reqs:
			if slices.Equal(r.ResourceNames, names) {
				return r
			}
		case <-deadline:
			t.Fatalf("no request for %v", names)
		}
	}
}

// send sends a CDS response holding clusters of those names.
func (s *scriptedADS) send(t *testing.T, version, nonce string, clusters ...string) {
	t.Helper()
	r := &discoveryv3.DiscoveryResponse{TypeUrl: resource.ClusterURL, VersionInfo: version, Nonce: nonce}
	for _, n := range clusters {
		a, err := anypb.New(&clusterv3.Cluster{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		r.Resources = append(r.Resources, a)
	}
	s.sendAny(t, r)
}

func (s *scriptedADS) sendAny(t *testing.T, r *discoveryv3.DiscoveryResponse) {
	t.Helper()
	select {
	case s.resp <- r:
	case <-time.After(wait):
		t.Fatal("no stream to send on")
	}
}
