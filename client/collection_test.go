package client_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// TP1 glob collections: members are delivered as they come and go; an
// empty glob is DoesNotExist.
func TestGlobMembership(t *testing.T) {
	o := testorigin.Start(t)
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

// TP1 list collections: locator entries are fetched, inline entries taken;
// #entry= resolves one inline entry.
func TestListCollections(t *testing.T) {
	o := testorigin.Start(t)
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

// #entry=: an unrelated change to the collection tells the watcher
// nothing; the entry going away is told once; coming back, it is Updated.
func TestEntryFollowsTheCollection(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(listColl(inlineEntry("e", "1", "one") + inlineEntry("other", "1", "o1")))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerCollectionURL, lcoll+"#entry=e", r.handle)
	r.expect(client.Updated, "", `"one"`)
	o.Apply(listColl(inlineEntry("e", "1", "one") + inlineEntry("other", "2", "o2")))
	barrier(t, c, o)
	o.Apply(listColl(inlineEntry("e", "2", "two") + inlineEntry("other", "2", "o2")))
	r.expect(client.Updated, "", `"two"`)
	// The entry is replaced by a locator: it is no longer there.
	o.Apply(listColl(locatorEntry("e") + inlineEntry("other", "3", "o3")))
	r.expect(client.Errored, "", `no inline entry "e"`)
	o.Apply(listColl(locatorEntry("e") + inlineEntry("other", "4", "o4")))
	barrier(t, c, o)
	o.Apply(listColl(inlineEntry("e", "3", "three") + inlineEntry("other", "4", "o4")))
	r.expect(client.Updated, "", `"three"`)
	r.none(barrier(t, c, o))
}

// A list collection whose entries change: members come and go, an inline
// entry replaced by a locator is fetched, and the locators' subscriptions
// end with the collection's.
func TestListCollectionChanges(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(listColl(inlineEntry("x", "1", "inl")+locatorEntry("m1")) + listener("m1", "M1") + "---\n" + listener("x", "fetched") + "---\n" + listener("m2", "M2"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	got := make(chan string, 100)
	cancel, err := c.WatchCollection(t.Context(), resource.ListenerCollectionURL, lcoll, func(ms []client.CollectionMember) {
		var s []string
		for _, m := range ms {
			msg, _ := m.Variant.Message()
			var tag string
			if l, ok := msg.(interface{ GetStatPrefix() string }); ok {
				tag = l.GetStatPrefix()
			}
			s = append(s, m.Name+"="+tag)
		}
		slices.Sort(s)
		got <- strings.Join(s, " ")
	}, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	until := func(want string) {
		t.Helper()
		w := strings.Split(want, " ")
		slices.Sort(w)
		want = strings.Join(w, " ")
		for s := ""; s != want; {
			select {
			case s = <-got:
			case <-time.After(wait):
				t.Fatalf("members never became %q (last %q)", want, s)
			}
		}
	}
	until(lis + "m1=M1 x=inl")
	o.Apply(listColl(locatorEntry("x") + locatorEntry("m2")))
	until(lis + "m2=M2 " + lis + "x=fetched")
	noSubs(t, c, o, lis+"m1")
	o.Apply(listener("m2", "M2b"))
	until(lis + "m2=M2b " + lis + "x=fetched")
	<-cancel()
	noSubs(t, c, o, lis+"m2", lis+"x", lcoll)
}

// Glob URL and members with context params in another order or escaping:
// the members are matched and named canonically.
func TestGlobParamsCanonical(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(listener("p/one?b=2&a=%7E", "1"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"p/*?b=%32&a=~", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, lis+"p/one?a=%7E&b=2", `"1"`)
	o.Apply(listener("p/two?a=~&b=2", "2"))
	r.expect(client.Updated, lis+"p/two?a=%7E&b=2", `"2"`)
	o.Apply(listener("p/one?a=~&b=2", "1b"))
	r.expect(client.Updated, lis+"p/one?a=%7E&b=2", `"1b"`)
	o.Remove("lds", lis+"p/two?a=%7E&b=2")
	r.expect(client.Removed, lis+"p/two?a=%7E&b=2", "")
	<-cancel()
	noSubs(t, c, o, lis+"p/*?a=%7E&b=2")
}

// A list collection's locator entry may carry directives: its #alt= is
// honoured for that member while the member's authority is unreachable.
func TestListCollectionLocatorAlt(t *testing.T) {
	onprem, cloud := testorigin.Start(t), testorigin.Start(t)
	coll := "xdstp://onprem/envoy.config.listener.v3.ListenerCollection/c"
	primary := "xdstp://cloud/envoy.config.listener.v3.Listener/m"
	alt := "xdstp://onprem/envoy.config.listener.v3.Listener/m"
	onprem.Apply(fmt.Sprintf(`name: %s
resource:
  "@type": type.googleapis.com/envoy.config.listener.v3.ListenerCollection
  entries:
  - locator:
      authority: cloud
      resource_type: envoy.config.listener.v3.Listener
      id: m
      directives:
      - alt: {authority: onprem, resource_type: envoy.config.listener.v3.Listener, id: m}
---
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: %q
stat_prefix: from-alt
`, coll, alt))
	cloud.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\nstat_prefix: primary\n", primary))
	b := bs{servers: []string{onprem.Addr}, authorities: map[string][]string{"cloud": {cloud.Addr}, "onprem": {onprem.Addr}}}.build(t)
	c := newClient(t, b, client.Options{AltTimeout: 100 * time.Millisecond})
	got := make(chan string, 100)
	cancel, err := c.WatchCollection(t.Context(), resource.ListenerCollectionURL, coll, func(ms []client.CollectionMember) {
		var s []string
		for _, m := range ms {
			msg, _ := m.Variant.Message()
			s = append(s, msg.(interface{ GetStatPrefix() string }).GetStatPrefix())
		}
		got <- strings.Join(s, " ")
	}, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	until := func(want string) {
		t.Helper()
		for s := ""; s != want; {
			select {
			case s = <-got:
			case <-time.After(wait):
				t.Fatalf("members never became %q (last %q)", want, s)
			}
		}
	}
	until("primary")
	cloud.Stop()
	until("from-alt")
	cloud.Start()
	until("primary")
}

// A glob covers immediate children only, with its own parameters.
func TestGlobImmediateChildrenOnly(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(listener("d/deep/x", "deep") + "---\n" + listener("d/p?k=1", "other-params") + "---\n" + listener("d/kid", "kid"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"d/*", r.handle)
	r.expect(client.Updated, lis+"d/kid", `"kid"`)
	o.Apply(listener("d/deep/y", "deep2") + "---\n" + listener("d/q?k=1", "other2"))
	r.none(barrier(t, c, o))
}

// A WatchCollection onErr may cancel its own collection: it is not called
// with the collection's lock held, so the delivery goroutine — and every
// other watcher of the client — carries on.
func TestCollectionOnErrMayCancelCollection(t *testing.T) {
	o := testorigin.Start(t)
	coll := "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"
	o.Apply(listenerCollection(coll, "nowhere/x") + "---\n" + cluster("other", "o"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	ready := make(chan struct{})
	errs := make(chan error, 10)
	var cancel client.CancelFunc
	cancel, err := c.WatchCollection(context.Background(), resource.ListenerCollectionURL, coll, func([]client.CollectionMember) {}, func(err error) {
		<-ready
		errs <- err
		cancel()
	})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	select {
	case err := <-errs:
		t.Logf("onErr: %v", err)
	case <-time.After(wait):
		t.Fatal("onErr not called for a member in an unknown authority")
	}
	// Every other watch is still delivered.
	r := newRecorder(t)
	oc, err := c.Watch(t.Context(), resource.ClusterURL, "other", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer oc()
	r.expect(client.Updated, "other", "")
	select {
	case err := <-errs:
		t.Errorf("onErr called after its collection was cancelled: %v", err)
	default:
	}
}

// A glob watch is cancelled, then one of its members is watched directly
// across a server restart: the member is fetched again and delivered. (Its
// version, kept from the glob, was declared in initial_resource_versions,
// so the server sent nothing, and the does-not-exist timer never started:
// the watch waited for ever.)
func TestGlobCancelForgetsMembers(t *testing.T) {
	o := testorigin.Start(t)
	m := lis + "g/one"
	o.Apply(listener("g/one", "member"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	rg := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"g/*", rg.handle)
	if err != nil {
		t.Fatal(err)
	}
	rg.expect(client.Updated, m, "member")
	<-cancel()
	barrier(t, c, o)
	o.Stop()
	r := newRecorder(t)
	cancel, err = c.Watch(t.Context(), resource.ListenerURL, m, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	o.Start()
	r.expect(client.Updated, m, "member")
}
