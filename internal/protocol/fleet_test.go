package protocol_test

import (
	"fmt"
	"reflect"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

// The fleet index counts streams by agent — the node's user_agent_name,
// else the gRPC user-agent header (this harness's client is grpc-go) —
// and by the parameters of their subscriptions, and forgets a stream
// that ends.
func TestFleetGroups(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("c"))
	envoyNode := node("e1", map[string]string{"env": "prod"})
	envoyNode.UserAgentName = "envoy"
	e := h.sotw(envoyNode)
	e.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
	e.Recv()
	g := h.sotw(node("g1", map[string]string{"env": "test"}))
	g.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c"}})
	g.Recv()
	want := []fleet.Group{
		{Agent: fleet.Envoy, Params: map[string]string{"env": "prod"}, Count: 1, Nodes: []string{"e1"}, Holds: []string{"envoy.config.cluster.v3.Cluster: 1"}},
		{Agent: fleet.GRPCGo, Params: map[string]string{"env": "test"}, Count: 1, Nodes: []string{"g1"}, Holds: []string{"envoy.config.cluster.v3.Cluster: 1"}},
	}
	if got := h.srv.Groups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %+v, want %+v", got, want)
	}
	for _, c := range h.srv.Streams() {
		if want := map[string]string{"e1": fleet.Envoy, "g1": fleet.GRPCGo}[c.NodeID]; c.Agent != want {
			t.Errorf("client %s: agent %q, want %q", c.NodeID, c.Agent, want)
		}
	}
}

// Concerned reports the streams a change reaches — by name or wildcard —
// and nothing of the others, each with only the changed names' state.
func TestFleetConcerned(t *testing.T) {
	h := newHarness(t)
	h.put(cluster("c"), cluster("d"))
	byC := h.sotw(node("by-c", nil))
	byC.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"c", "d"}})
	byC.Recv()
	byD := h.sotw(node("by-d", nil))
	byD.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"d"}})
	byD.Recv()
	all := h.sotw(node("all", nil))
	all.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL})
	all.Recv()
	got := map[string]string{}
	for _, c := range h.srv.Concerned(protocol.Changed{resource.ClusterURL: {"c"}}) {
		for _, ts := range c.Types {
			var subs, held []string
			for _, s := range ts.Subscriptions {
				subs = append(subs, s.Name)
			}
			for _, hd := range ts.Held {
				held = append(held, hd.Name)
			}
			got[c.NodeID] = fmt.Sprint(subs, held)
		}
	}
	want := map[string]string{"by-c": "[c] [c]", "all": "[*] [c]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("concerned: %v, want %v", got, want)
	}
}
