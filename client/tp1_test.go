package client_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

const lis = "xdstp://a/envoy.config.listener.v3.Listener/"

func listener(id, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\nstat_prefix: %q\n", lis+id, tag)
}

// listenerCollection is a ListenerCollection document named name whose
// entries are locators "authority/id" of listeners.
func listenerCollection(name string, locators ...string) string {
	doc := "name: " + name + "\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n"
	for _, l := range locators {
		auth, id, _ := strings.Cut(l, "/")
		doc += fmt.Sprintf("  - locator: {authority: %s, resource_type: envoy.config.listener.v3.Listener, id: %s}\n", auth, id)
	}
	return doc
}

// TP1 glob collections: members are delivered as they come and go; an
// empty glob is DoesNotExist.
func TestGlobMembership(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(listener("svc/one?p=1", "1") + "---\n" + listener("svc/other", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	if _, err := c.Watch(t.Context(), resource.ListenerURL, lis+"svc/*?p=1", r.handle); err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, lis+"svc/one?p=1", `"1"`)
	o.Apply(listener("svc/two?p=1", "2"))
	r.expect(client.Updated, lis+"svc/two?p=1", `"2"`)
	o.Remove("lds", lis+"svc/one?p=1")
	r.expect(client.Removed, lis+"svc/one?p=1", "")
	empty := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"nothing/*", empty.handle)
	empty.expect(client.DoesNotExist, lis+"nothing/*", "")
	o.Apply(listener("nothing/first", "f"))
	empty.expect(client.Updated, lis+"nothing/first", `"f"`)
	// Globs need delta.
	sotw := newClient(t, bs{servers: []string{o.Addr}, sotw: true, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	if _, err := sotw.Watch(t.Context(), resource.ListenerURL, lis+"svc/*", r.handle); err == nil || !strings.Contains(err.Error(), "delta") {
		t.Errorf("glob over SotW: %v", err)
	}
}

// TP1 redirects: a ResourceLocator payload is followed (the event says
// through what); chains are bounded and loops reported.
func TestRedirects(t *testing.T) {
	o := servertest.Start(t)
	redirect := func(from, to string) string {
		return fmt.Sprintf("type: lds\nname: %s\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: a\n  resource_type: envoy.config.listener.v3.Listener\n  id: %s\n", lis+from, to)
	}
	o.Apply(redirect("old", "mid") + "---\n" + redirect("mid", "new") + "---\n" + listener("new", "target") + "---\n" +
		redirect("loop1", "loop2") + "---\n" + redirect("loop2", "loop1"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"old", r.handle)
	e := r.expect(client.Updated, lis+"old", `"target"`)
	if strings.Join(e.Via, " ") != lis+"mid "+lis+"new" {
		t.Errorf("via %v", e.Via)
	}
	// Moving a redirect moves the watcher.
	o.Apply(redirect("mid", "newer") + "---\n" + listener("newer", "moved"))
	r.expect(client.Updated, lis+"old", `"moved"`)
	loop := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"loop1", loop.handle)
	loop.expect(client.Errored, lis+"loop1", "redirect loop")
}

// TP1 list collections: locator entries are fetched, inline entries taken;
// #entry= resolves one inline entry.
func TestListCollections(t *testing.T) {
	o := servertest.Start(t)
	coll := "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"
	o.Apply(fmt.Sprintf(`name: %s
resource:
  "@type": type.googleapis.com/envoy.config.listener.v3.ListenerCollection
  entries:
  - locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: ref}
  - inline_entry:
      name: inl
      version: "7"
      resource: {"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: inl, stat_prefix: inline}
---
`, coll) + listener("ref", "referenced"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	got := make(chan string, 10)
	cancel, err := c.WatchCollection(t.Context(), resource.ListenerCollectionURL, coll, func(ms []client.CollectionMember) {
		var names []string
		for _, m := range ms {
			names = append(names, fmt.Sprintf("%s:%v", m.Name, m.Inline))
		}
		sort.Strings(names)
		got <- strings.Join(names, " ")
	}, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	want := "inl:true " + lis + "ref:false"
	for s := ""; s != want; {
		select {
		case s = <-got:
		case <-time.After(wait):
			t.Fatalf("collection members never became %q", want)
		}
	}
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerCollectionURL, coll+"#entry=inl", r.handle)
	e := r.expect(client.Updated, "", `"inline"`)
	if e.Variant.Type.URL != resource.ListenerURL || e.Variant.Version != "7" {
		t.Errorf("entry variant %s %s", e.Variant.Type.URL, e.Variant.Version)
	}
	missing := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerCollectionURL, coll+"#entry=nope", missing.handle)
	missing.expect(client.Errored, "", `no inline entry "nope"`)
}

// On-demand VHDS: "<rc>/<host>" resolves to the virtual host by name or
// alias; not found is DoesNotExist.
func TestVirtualHost(t *testing.T) {
	o := servertest.Start(t)
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

// A redirect's target must be of the watched type and in an authority the
// client knows: otherwise the watcher is told why, and nothing is
// subscribed.
func TestRedirectTargetChecked(t *testing.T) {
	o := servertest.Start(t)
	o.Apply("type: lds\nname: " + lis + "elsewhere\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n" +
		"  authority: nowhere\n  resource_type: envoy.config.listener.v3.Listener\n  id: x\n")
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"elsewhere", r.handle)
	r.expect(client.Errored, lis+"elsewhere", `authority "nowhere" is not in "authorities"`)
	barrier(t, c, o)
	if s := o.Subscriptions("xdstp://nowhere/envoy.config.listener.v3.Listener/x"); s != 0 {
		t.Errorf("redirect target subscribed %d times", s)
	}
	// An #alt= in an authority the client does not know, or of another
	// type, is refused at once.
	if _, err := c.Watch(t.Context(), resource.ListenerURL, lis+"x#alt=xdstp://nowhere/envoy.config.listener.v3.Listener/x", r.handle); err == nil {
		t.Error("#alt= into an unknown authority accepted")
	}
	if _, err := c.Watch(t.Context(), resource.ListenerURL, lis+"x#alt=xdstp://a/envoy.config.cluster.v3.Cluster/x", r.handle); err == nil {
		t.Error("#alt= of another type accepted")
	}

	// xdsd's store refuses a redirect to another type; a server may not.
	addr, srv := startScriptedADS(t)
	c2 := newClient(t, bs{servers: []string{addr}, sotw: true, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r2 := newRecorder(t)
	c2.Watch(t.Context(), resource.ListenerURL, lis+"to-cluster", r2.handle)
	srv.request(t, lis+"to-cluster")
	loc, err := anypb.New(&xdscorev3.ResourceLocator{Authority: "a", ResourceType: "envoy.config.cluster.v3.Cluster", Id: "c"})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := anypb.New(&discoveryv3.Resource{Name: lis + "to-cluster", Resource: loc})
	if err != nil {
		t.Fatal(err)
	}
	srv.sendAny(t, &discoveryv3.DiscoveryResponse{TypeUrl: resource.ListenerURL, VersionInfo: "1", Nonce: "n1", Resources: []*anypb.Any{wrapped}})
	r2.expect(client.Errored, lis+"to-cluster", "its target xdstp://a/envoy.config.cluster.v3.Cluster/c is a envoy.config.cluster.v3.Cluster, not a envoy.config.listener.v3.Listener")
}
