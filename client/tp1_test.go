package client_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/servertest"
)

const lis = "xdstp://a/envoy.config.listener.v3.Listener/"

func listener(id, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\nstat_prefix: %q\n", lis+id, tag)
}

// TP1 glob collections: members are delivered as they come and go; an
// empty glob is DoesNotExist.
func TestGlobMembership(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(listener("svc/one?p=1", "1") + "---\n" + listener("svc/other", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	if _, err := c.Watch(resource.ListenerURL, lis+"svc/*?p=1", r.handle); err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, lis+"svc/one?p=1", `"1"`)
	o.Apply(listener("svc/two?p=1", "2"))
	r.expect(client.Updated, lis+"svc/two?p=1", `"2"`)
	o.Remove("lds", lis+"svc/one?p=1")
	r.expect(client.Removed, lis+"svc/one?p=1", "")
	empty := newRecorder(t)
	c.Watch(resource.ListenerURL, lis+"nothing/*", empty.handle)
	empty.expect(client.DoesNotExist, lis+"nothing/*", "")
	o.Apply(listener("nothing/first", "f"))
	empty.expect(client.Updated, lis+"nothing/first", `"f"`)
	// Globs need delta.
	sotw := newClient(t, bs{servers: []string{o.Addr}, sotw: true, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	if _, err := sotw.Watch(resource.ListenerURL, lis+"svc/*", r.handle); err == nil || !strings.Contains(err.Error(), "delta") {
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
	c.Watch(resource.ListenerURL, lis+"old", r.handle)
	e := r.expect(client.Updated, lis+"old", `"target"`)
	if strings.Join(e.Via, " ") != lis+"mid "+lis+"new" {
		t.Errorf("via %v", e.Via)
	}
	// Moving a redirect moves the watcher.
	o.Apply(redirect("mid", "newer") + "---\n" + listener("newer", "moved"))
	r.expect(client.Updated, lis+"old", `"moved"`)
	loop := newRecorder(t)
	c.Watch(resource.ListenerURL, lis+"loop1", loop.handle)
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
	cancel, err := c.WatchCollection(resource.ListenerCollectionURL, coll, func(ms []client.CollectionMember) {
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
	c.Watch(resource.ListenerCollectionURL, coll+"#entry=inl", r.handle)
	e := r.expect(client.Updated, "", `"inline"`)
	if e.Variant.Type.URL != resource.ListenerURL || e.Variant.Version != "7" {
		t.Errorf("entry variant %s %s", e.Variant.Type.URL, e.Variant.Version)
	}
	missing := newRecorder(t)
	c.Watch(resource.ListenerCollectionURL, coll+"#entry=nope", missing.handle)
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
	c.VirtualHost("rc", "a.example.org", func(e client.TypedEvent[*routev3.VirtualHost]) { got <- e })
	if e := <-got; e.Kind != client.Updated || e.Resource.GetName() != "rc/web" {
		t.Fatalf("vhost %v %v", e.Kind, e.Resource)
	}
	c.VirtualHost("rc", "nowhere.net", func(e client.TypedEvent[*routev3.VirtualHost]) { got <- e })
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
