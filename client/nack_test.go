package client_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// scriptedDeltaADS is a delta ADS server whose test decides every
// response: it hands over each request and sends what it is given.
type scriptedDeltaADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	reqs chan *discoveryv3.DeltaDiscoveryRequest
	resp chan *discoveryv3.DeltaDiscoveryResponse
}

func startScriptedDeltaADS(t *testing.T) (string, *scriptedDeltaADS) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedDeltaADS{reqs: make(chan *discoveryv3.DeltaDiscoveryRequest, 100), resp: make(chan *discoveryv3.DeltaDiscoveryResponse, 10)}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, s)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String(), s
}

func (s *scriptedDeltaADS) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := st.Recv()
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
			if err := st.Send(r); err != nil {
				return err
			}
		case err := <-errc:
			return err
		}
	}
}

// PROTOCOL.md §2.1: a delta response the client rejects is NACKed by its
// nonce even when the next response arrives before the client sends: the
// NACK is not replaced by the next response's ACK.
func TestDeltaNACKSurvivesTheNextResponse(t *testing.T) {
	addr, s := startScriptedDeltaADS(t)
	c := newClient(t, bs{servers: []string{addr}}.build(t), client.Options{})
	for _, n := range []string{"a", "b"} {
		cancel, err := c.Watch(t.Context(), resource.ClusterURL, n, func(client.Event) {})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	subscribed := map[string]bool{}
	deadline := time.After(wait)
	for !subscribed["a"] || !subscribed["b"] {
		select {
		case r := <-s.reqs:
			for _, n := range r.ResourceNamesSubscribe {
				subscribed[n] = true
			}
		case <-deadline:
			t.Fatalf("subscribed to %v only", subscribed)
		}
	}
	for i := range 50 {
		// a is invalid (its payload names another cluster), b valid; both
		// are on the wire before the client has read either.
		bad := mustAny(t, &clusterv3.Cluster{Name: "not-a"})
		good := mustAny(t, &clusterv3.Cluster{Name: "b", AltStatName: fmt.Sprint(i)})
		n1, n2 := fmt.Sprintf("bad-%d", i), fmt.Sprintf("good-%d", i)
		s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: n1, Resources: []*discoveryv3.Resource{{Name: "a", Version: fmt.Sprint(i), Resource: bad}}}
		s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: n2, Resources: []*discoveryv3.Resource{{Name: "b", Version: fmt.Sprint(i), Resource: good}}}
		nacked := false
		for acked := false; !acked; {
			select {
			case r := <-s.reqs:
				switch r.ResponseNonce {
				case n1:
					if r.ErrorDetail == nil {
						t.Fatalf("round %d: the invalid response was ACKed", i)
					}
					nacked = true
				case n2:
					if r.ErrorDetail != nil {
						t.Fatalf("round %d: the valid response was NACKed: %s", i, r.ErrorDetail.Message)
					}
					acked = true
				}
			case <-deadline:
				t.Fatalf("round %d: no ACK of the valid response", i)
			}
		}
		if !nacked {
			t.Fatalf("round %d: the NACK was never sent", i)
		}
	}
}

func mustAny(t *testing.T, m *clusterv3.Cluster) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
