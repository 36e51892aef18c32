package client_test

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// A resource the server sends after the client unsubscribed from it (the
// response crossed the unsubscription on the wire) is not cached: a later
// watcher of the name is not served that copy, which nothing would have
// kept current, but waits for the server's word.
func TestAnswerCrossingUnsubscribeIsNotCached(t *testing.T) {
	addr, s := startScriptedDeltaADS(t)
	c := newClient(t, bs{servers: []string{addr}}.build(t), client.Options{DoesNotExistTimeout: -1})
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	s.await(t, "subscribing a", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesSubscribe) == 1 && r.ResourceNamesSubscribe[0] == "a"
	})
	cancel()
	s.await(t, "unsubscribing a", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesUnsubscribe) == 1 && r.ResourceNamesUnsubscribe[0] == "a"
	})
	s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "late", Resources: []*discoveryv3.Resource{
		{Name: "a", Version: "1", Resource: mustAny(t, &clusterv3.Cluster{Name: "a"})}}}
	s.await(t, "acknowledging the late answer", func(r *discoveryv3.DeltaDiscoveryRequest) bool { return r.ResponseNonce == "late" })

	r := newRecorder(t)
	cancel, err = c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	s.await(t, "subscribing a again", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesSubscribe) == 1 && r.ResourceNamesSubscribe[0] == "a"
	})
	s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "fresh", Resources: []*discoveryv3.Resource{
		{Name: "a", Version: "2", Resource: mustAny(t, &clusterv3.Cluster{Name: "a"})}}}
	if e := r.next(); e.Kind != client.Updated || e.Variant == nil || e.Variant.Version != "2" {
		t.Fatalf("first event %s, want the server's fresh version 2 (not the late copy)", describe(e))
	}
}
