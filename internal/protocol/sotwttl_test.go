package protocol_test

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/resource"
)

// unwrap decodes a SotW response's wrapped resources.
func unwrap(t *testing.T, r *discoveryv3.DiscoveryResponse) []*discoveryv3.Resource {
	t.Helper()
	var out []*discoveryv3.Resource
	for _, a := range r.Resources {
		if a.TypeUrl != resource.WrapperURL {
			t.Fatalf("not wrapped: %s", a.TypeUrl)
		}
		res := &discoveryv3.Resource{}
		if err := a.UnmarshalTo(res); err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
	return out
}

// docs/protocol.md §2.7 over SotW: a client that takes wrapped resources
// and supports TTLs gets each variant's TTL in its wrapper, and heartbeats
// well within it. For a type that is not a full state (endpoints) a
// heartbeat is the payload-less wrapper under the version the client ACKed
// (what Envoy takes as one); for a full-state type (clusters) it is the
// whole state again — a response of payload-less wrappers would be a state
// without the resources. A client that does not take wrapped resources
// gets no TTL.
func TestSotW_2_7_TTLAndHeartbeats(t *testing.T) {
	h := newHarness(t)
	const ttl = 300 * time.Millisecond
	e := variant(resource.EndpointURL, "e", "", `{"@type": "envoy.config.endpoint.v3.ClusterLoadAssignment", "cluster_name": "e"}`)
	e.TTL = ttl
	a := cluster("a")
	a.TTL = ttl
	h.put(e, a, cluster("b"))
	features := []string{"xds.config.supports-resource-in-sotw", "xds.config.supports-resource-ttl"}

	eds := h.sotw(node("eds", nil, features...))
	eds.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointURL, ResourceNames: []string{"e"}})
	r := eds.Recv()
	res := unwrap(t, r)
	if len(res) != 1 || res[0].GetTtl().AsDuration() != ttl || res[0].Resource == nil {
		t.Fatalf("first response: %v", res)
	}
	eds.Ack(r, "e")
	hb := eds.Recv()
	beats := unwrap(t, hb)
	if hb.VersionInfo != r.VersionInfo || len(beats) != 1 || beats[0].Name != "e" || beats[0].Resource != nil ||
		beats[0].Version != res[0].Version || beats[0].GetTtl().AsDuration() != ttl {
		t.Fatalf("want a heartbeat of e under version %s, got %v", r.VersionInfo, hb)
	}
	eds.Ack(hb, "e")

	cds := h.sotw(node("cds", nil, features...))
	cds.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a", "b"}})
	r = cds.Recv()
	if got := unwrap(t, r); len(got) != 2 || got[0].GetTtl().AsDuration() != ttl || got[1].Ttl != nil {
		t.Fatalf("first response: %v", got)
	}
	cds.Ack(r, "a", "b")
	again := cds.Recv()
	if got := unwrap(t, again); len(got) != 2 || got[0].Resource == nil || got[1].Resource == nil || got[0].GetTtl().AsDuration() != ttl {
		t.Fatalf("want the full state again, a with its TTL, got %v", got)
	}
	cds.Ack(again, "a", "b")

	plain := h.sotw(node("plain", nil, "xds.config.supports-resource-ttl"))
	plain.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.EndpointURL, ResourceNames: []string{"e"}})
	if r := plain.Recv(); len(r.Resources) != 1 || r.Resources[0].TypeUrl == resource.WrapperURL {
		t.Fatalf("a client without wrapped resources: %v", r)
	}
}
