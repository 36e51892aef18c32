package client_test

import (
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// On-demand VHDS: "<rc>/<host>" resolves to the virtual host by name or
// alias; not found is DoesNotExist.
func TestVirtualHost(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(`"@type": type.googleapis.com/envoy.config.route.v3.VirtualHost
name: rc/web
domains: ["www.example.com", "*.example.org"]
`)
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	got := make(chan client.TypedEvent[*routev3.VirtualHost], 10)
	c.VirtualHost(t.Context(), "rc", "a.example.org", func(e client.TypedEvent[*routev3.VirtualHost]) { got <- e })
	if e := <-got; e.Kind != client.Updated || e.Resource.GetName() != "rc/web" {
		t.Fatalf("vhost %v %v", e.Kind, e.Resource)
	}
	c.VirtualHost(t.Context(), "rc", "nowhere.net", func(e client.TypedEvent[*routev3.VirtualHost]) { got <- e })
	if e := <-got; e.Kind != client.DoesNotExist {
		t.Fatalf("not found: %v", e.Kind)
	}
	// A host found later is delivered.
	o.Apply(`"@type": type.googleapis.com/envoy.config.route.v3.VirtualHost
name: rc/net
domains: ["*.net"]
`)
	if e := <-got; e.Kind != client.Updated || e.Resource.GetName() != "rc/net" {
		t.Fatalf("found later: %v %v", e.Kind, e.Resource)
	}
}

// docs/protocol.md §5.4: a server removes a virtual host by its VirtualHost
// name. An on-demand VHDS watcher, which asked for "<rc>/<host>" and was
// answered with that virtual host under an alias, is told it is removed;
// and once a virtual host answers the name again, it is told of that one.
func TestVHDSWatcherToldWhenVirtualHostRemovedByName(t *testing.T) {
	addr, s := startScriptedDeltaADS(t)
	c := newClient(t, bs{servers: []string{addr}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.VirtualHostURL, "rc/a.example.org", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	select {
	case <-s.reqs:
	case <-time.After(wait):
		t.Fatal("no request")
	}
	vh := func(name, version string, domains ...string) *discoveryv3.Resource {
		a, err := anypb.New(&routev3.VirtualHost{Name: name, Domains: domains})
		if err != nil {
			t.Fatal(err)
		}
		return &discoveryv3.Resource{Name: name, Version: version, Aliases: []string{"rc/a.example.org"}, Resource: a}
	}
	s.send(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostURL, Nonce: "1",
		Resources: []*discoveryv3.Resource{vh("rc/web", "1", "*.example.org")}})
	r.expect(client.Updated, "rc/a.example.org", "rc/web")
	s.send(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostURL, Nonce: "2", RemovedResources: []string{"rc/web"}})
	r.expect(client.Removed, "rc/a.example.org", "")
	s.send(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostURL, Nonce: "3",
		Resources: []*discoveryv3.Resource{vh("rc/other", "2", "a.example.org")}})
	r.expect(client.Updated, "rc/a.example.org", "rc/other")
}

// The same against xdsd's own server: the virtual host a watcher's name
// resolved to is deleted from the store, and the watcher hears of it.
func TestVHDSWatcherToldWhenServerRemovesVirtualHost(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply("\"@type\": type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: rc/web\ndomains: [\"*.example.org\"]\n")
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.VirtualHostURL, "rc/a.example.org", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	r.expect(client.Updated, "", "rc/web")
	o.Remove("vhds", "rc/web")
	r.expect(client.Removed, "rc/a.example.org", "")
}

// A virtual host answering an on-demand name after the client unsubscribed
// it (the answer crossed the unsubscription on the wire) is not cached: a
// later watcher of the name waits for the server's word instead of being
// served that copy, which nothing kept current.
func TestVHDSAnswerCrossingUnsubscribeIsNotCached(t *testing.T) {
	addr, s := startScriptedDeltaADS(t)
	c := newClient(t, bs{servers: []string{addr}}.build(t), client.Options{DoesNotExistTimeout: -1})
	const alias = "rc/a.example.org"
	subscribes := func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesSubscribe) == 1 && r.ResourceNamesSubscribe[0] == alias
	}
	vh := func(version string) *discoveryv3.Resource {
		a, err := anypb.New(&routev3.VirtualHost{Name: "rc/web", Domains: []string{"*.example.org"}})
		if err != nil {
			t.Fatal(err)
		}
		return &discoveryv3.Resource{Name: "rc/web", Version: version, Aliases: []string{alias}, Resource: a}
	}
	cancel, err := c.Watch(t.Context(), resource.VirtualHostURL, alias, func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	s.await(t, "subscribing the name", subscribes)
	cancel()
	s.await(t, "unsubscribing the name", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesUnsubscribe) == 1 && r.ResourceNamesUnsubscribe[0] == alias
	})
	s.send(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostURL, Nonce: "late", Resources: []*discoveryv3.Resource{vh("1")}})
	s.await(t, "acknowledging the late answer", func(r *discoveryv3.DeltaDiscoveryRequest) bool { return r.ResponseNonce == "late" })

	r := newRecorder(t)
	cancel, err = c.Watch(t.Context(), resource.VirtualHostURL, alias, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	s.await(t, "subscribing the name again", subscribes)
	s.send(t, &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.VirtualHostURL, Nonce: "fresh", Resources: []*discoveryv3.Resource{vh("2")}})
	if e := r.next(); e.Kind != client.Updated || e.Variant == nil || e.Variant.Version != "2" {
		t.Fatalf("first event %s, want the server's fresh version 2 (not the late copy)", describe(e))
	}
}
