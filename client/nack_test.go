package client_test

import (
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §2.1: a delta response the client rejects is NACKed by its
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
