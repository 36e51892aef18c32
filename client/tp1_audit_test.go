package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

func lisRedirect(from, to string) string {
	return fmt.Sprintf("type: lds\nname: %s\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: a\n  resource_type: envoy.config.listener.v3.Listener\n  id: %s\n", lis+from, to)
}

// byName waits for one event for each name, in any order.
func (r *recorder) byName(names ...string) map[string]client.Event {
	r.t.Helper()
	got := map[string]client.Event{}
	for len(got) < len(names) {
		e := r.next()
		if _, ok := got[e.Name]; ok || !slices.Contains(names, e.Name) {
			r.t.Fatalf("unexpected event %s", describe(e))
		}
		got[e.Name] = e
	}
	return got
}

// noSubs checks, once the server has handled what the client sent, that
// it holds no subscription to the names.
func noSubs(t *testing.T, c *client.Client, o *servertest.Origin, names ...string) {
	t.Helper()
	barrier(t, c, o)
	for _, n := range names {
		if s := o.Subscriptions(n); s != 0 {
			t.Errorf("%s: %d subscriptions left", n, s)
		}
	}
}

// TP1: "Glob collections may have individual resources redirected": a
// glob member whose payload is a ResourceLocator is followed, and the
// watcher is told the target's resource (via the redirect), never the
// locator itself.
func TestGlobMemberRedirected(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(listener("g/plain", "plain") + "---\n" + lisRedirect("g/moved", "target") + "---\n" + listener("target", "T1"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"g/*", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.Event{}
	for len(got) < 2 {
		e := r.next()
		got[e.Name] = e
	}
	e := got[lis+"g/moved"]
	if e.Kind != client.Updated || e.Variant == nil || e.Variant.IsRedirect() {
		t.Fatalf("redirected member delivered as %s", describe(e))
	}
	if len(e.Via) != 1 || e.Via[0] != lis+"target" {
		t.Errorf("via %v", e.Via)
	}
	// The target changes: the member is updated.
	o.Apply(listener("target", "T2"))
	r.expect(client.Updated, lis+"g/moved", `"T2"`)
	// The redirect moves: the old target is let go.
	o.Apply(lisRedirect("g/moved", "target2") + "---\n" + listener("target2", "U"))
	r.expect(client.Updated, lis+"g/moved", `"U"`)
	noSubs(t, c, o, lis+"target")
	// The target is deleted: so is the member.
	o.Remove("lds", lis+"target2")
	r.expect(client.Removed, lis+"g/moved", "")
	// A member redirected into a loop is reported by its name.
	o.Apply(lisRedirect("g/moved", "g/loop") + "---\n" + lisRedirect("g/loop", "g/moved"))
	for _, e := range r.byName(lis+"g/loop", lis+"g/moved") {
		if e.Kind != client.Errored || !strings.Contains(e.Err.Error(), "redirect loop") {
			t.Errorf("looping member: %s", describe(e))
		}
	}
	o.Apply(listener("g/loop", "fixed"))
	for _, e := range r.byName(lis+"g/loop", lis+"g/moved") {
		if e.Kind != client.Updated || !strings.Contains(describe(e), `"fixed"`) {
			t.Errorf("fixed member: %s", describe(e))
		}
	}
	cancel()
	noSubs(t, c, o, lis+"target2", lis+"g/*", lis+"g/loop", lis+"g/moved")
}

// A redirect whose target is deleted, then moved: the watcher is told
// Removed, then follows the new target; the old target's subscription is
// dropped, and all go on cancel.
func TestRedirectTargetDeletedAndMoved(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(lisRedirect("r", "t1") + "---\n" + listener("t1", "one"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"r", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, lis+"r", `"one"`)
	o.Remove("lds", lis+"t1")
	r.expect(client.Removed, lis+"r", "")
	o.Apply(lisRedirect("r", "t2") + "---\n" + listener("t2", "two"))
	r.expect(client.Updated, lis+"r", `"two"`)
	noSubs(t, c, o, lis+"t1")
	// The redirect itself becomes a plain resource.
	o.Apply(listener("r", "direct"))
	r.expect(client.Updated, lis+"r", `"direct"`)
	noSubs(t, c, o, lis+"t2")
	cancel()
	noSubs(t, c, o, lis+"r")
}

// Loops and over-long chains are reported, and leave no subscription
// behind once cancelled.
func TestRedirectLoopAndChainLeaveNothing(t *testing.T) {
	o := servertest.Start(t)
	doc := lisRedirect("l1", "l2") + "---\n" + lisRedirect("l2", "l3") + "---\n" + lisRedirect("l3", "l1")
	for i := 0; i < 5; i++ {
		doc += "---\n" + lisRedirect(fmt.Sprintf("c%d", i), fmt.Sprintf("c%d", i+1))
	}
	doc += "---\n" + listener("c5", "end")
	o.Apply(doc)
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{MaxRedirects: 3})
	loop, long := newRecorder(t), newRecorder(t)
	cl, _ := c.Watch(t.Context(), resource.ListenerURL, lis+"l1", loop.handle)
	cc, _ := c.Watch(t.Context(), resource.ListenerURL, lis+"c0", long.handle)
	loop.expect(client.Errored, lis+"l1", "redirect loop")
	long.expect(client.Errored, lis+"c0", "more than 3 redirects")
	loop.none()
	cl()
	cc()
	for _, n := range []string{"l1", "l2", "l3", "c0", "c1", "c2", "c3", "c4", "c5"} {
		noSubs(t, c, o, lis+n)
	}
}

// The same xdstp name, its parameters in another order or escaped
// differently, is one subscription.
func TestSameNameSharesSubscription(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(listener("x?a=1&b=%7E", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r1, r2 := newRecorder(t), newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"x?b=~&a=1", r1.handle)
	c.Watch(t.Context(), resource.ListenerURL, lis+"%78?a=%31&b=%7e", r2.handle)
	r1.expect(client.Updated, "", `"x"`)
	r2.expect(client.Updated, "", `"x"`)
	barrier(t, c, o)
	if n := o.Subscriptions(lis + "x?a=1&b=%7E"); n != 1 {
		t.Errorf("%d subscriptions", n)
	}
}

// A name whose authority is not in the bootstrap is refused at once.
func TestUnknownAuthorityRefused(t *testing.T) {
	o := servertest.Start(t)
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	_, err := c.Watch(t.Context(), resource.ListenerURL, "xdstp://zzz/envoy.config.listener.v3.Listener/x", func(client.Event) {})
	if err == nil {
		t.Fatal("accepted")
	}
	t.Log(err)
}

const lcoll = "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"

func listColl(entries string) string {
	return fmt.Sprintf("name: %s\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n%s---\n", lcoll, entries)
}

func inlineEntry(name, version, tag string) string {
	return fmt.Sprintf("  - inline_entry:\n      name: %s\n      version: %q\n      resource: {\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener, name: %s, stat_prefix: %s}\n", name, version, name, tag)
}

func locatorEntry(id string) string {
	return fmt.Sprintf("  - locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: %s}\n", id)
}

// #entry=: an unrelated change to the collection tells the watcher
// nothing; the entry going away is told once; coming back, it is Updated.
func TestEntryFollowsTheCollection(t *testing.T) {
	o := servertest.Start(t)
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
	barrier(t, c, o)
	r.none()
}

// A list collection whose entries change: members come and go, an inline
// entry replaced by a locator is fetched, and the locators' subscriptions
// end with the collection's.
func TestListCollectionChanges(t *testing.T) {
	o := servertest.Start(t)
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
	cancel()
	noSubs(t, c, o, lis+"m2", lis+"x", lcoll)
}

// #alt= on a glob is not served (failover of a glob is not defined): it
// is refused rather than silently ignored.
func TestAltOnGlobRefused(t *testing.T) {
	o := servertest.Start(t)
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil, "b": nil}}.build(t), client.Options{})
	_, err := c.Watch(t.Context(), resource.ListenerURL, lis+"g/*#alt=xdstp://b/envoy.config.listener.v3.Listener/g/*", func(client.Event) {})
	if err == nil {
		t.Fatal("#alt= on a glob accepted")
	}
}

// #alt= whose alt is unreachable too: the watcher keeps its last value
// and returns to the primary when it is back; cancelled while on the
// fallback, it leaves no subscription at the alt's server.
func TestAltUnreachableAndCancelOnFallback(t *testing.T) {
	onprem, cloud := servertest.Start(t), servertest.Start(t)
	alt := "xdstp://onprem/envoy.config.cluster.v3.Cluster/x"
	primary := "xdstp://cloud/envoy.config.cluster.v3.Cluster/x"
	onprem.Apply(cluster(alt, "from-alt"))
	cloud.Apply(cluster(primary, "P1"))
	b := bs{servers: []string{onprem.Addr}, authorities: map[string][]string{"cloud": {cloud.Addr}, "onprem": {onprem.Addr}}}.build(t)
	c := newClient(t, b, client.Options{AltTimeout: 100 * time.Millisecond})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt="+alt, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, primary, "P1")
	onprem.Stop()
	cloud.Stop()
	cloud.Start()
	onprem.Start()
	// Cloud is back: the watcher stays on (or returns to) the primary.
	cloud.Apply(cluster(primary, "P2"))
	for e := r.next(); !strings.Contains(describe(e), "P2"); e = r.next() {
		if e.Kind != client.Updated {
			t.Fatalf("while both were down: %s", describe(e))
		}
	}
	// Now on the fallback, then cancel.
	cloud.Stop()
	r.expect(client.Updated, primary, "from-alt")
	cancel()
	noSubs(t, c, onprem, alt)
	cloud.Start()
	r.none()
}

// Glob URL and members with context params in another order or escaping:
// the members are matched and named canonically.
func TestGlobParamsCanonical(t *testing.T) {
	o := servertest.Start(t)
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
	cancel()
	noSubs(t, c, o, lis+"p/*?a=%7E&b=2")
}

// Federation: a redirect into another authority, on another server, is
// fetched there; moved back, that server's subscription is dropped.
func TestRedirectAcrossAuthorities(t *testing.T) {
	oa, ob := servertest.Start(t), servertest.Start(t)
	lisB := "xdstp://b/envoy.config.listener.v3.Listener/"
	oa.Apply("type: lds\nname: " + lis + "r\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: b\n  resource_type: envoy.config.listener.v3.Listener\n  id: t\n")
	ob.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\nstat_prefix: onb\n", lisB+"t"))
	c := newClient(t, bs{servers: []string{oa.Addr}, authorities: map[string][]string{"a": {oa.Addr}, "b": {ob.Addr}}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"r", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, lis+"r", `"onb"`)
	oa.Apply(lisRedirect("r", "local") + "---\n" + listener("local", "ona"))
	r.expect(client.Updated, lis+"r", `"ona"`)
	// A barrier on b's stream: the LDS requests before it were handled.
	ob.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\n", lisB+"barrier"))
	br := newRecorder(t)
	cb, _ := c.Watch(t.Context(), resource.ListenerURL, lisB+"barrier", br.handle)
	br.expect(client.Updated, lisB+"barrier", "")
	cb()
	if n := ob.Subscriptions(lisB + "t"); n != 0 {
		t.Errorf("b still holds %d subscriptions", n)
	}
	cancel()
	noSubs(t, c, oa, lis+"r", lis+"local")
}

// A list collection's locator entry may carry directives: its #alt= is
// honoured for that member while the member's authority is unreachable.
func TestListCollectionLocatorAlt(t *testing.T) {
	onprem, cloud := servertest.Start(t), servertest.Start(t)
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

// A list collection may be redirected (TP1): WatchCollection and #entry=
// follow it, and follow it when it moves.
func TestListCollectionRedirected(t *testing.T) {
	o := servertest.Start(t)
	base := "xdstp://a/envoy.config.listener.v3.ListenerCollection/"
	redir := func(from, to string) string {
		return fmt.Sprintf("type: listenercollection\nname: %s\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: a\n  resource_type: envoy.config.listener.v3.ListenerCollection\n  id: %s\n---\n", base+from, to)
	}
	coll := func(id, tag string) string {
		return fmt.Sprintf("name: %s\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n%s---\n", base+id, inlineEntry("e", tag, tag))
	}
	o.Apply(redir("r", "c1") + coll("c1", "one") + coll("c2", "two"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerCollectionURL, base+"r#entry=e", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	if e := r.expect(client.Updated, "", `"one"`); len(e.Via) != 1 || e.Via[0] != base+"c1" {
		t.Errorf("via %v", e.Via)
	}
	o.Apply(redir("r", "c2"))
	r.expect(client.Updated, "", `"two"`)
	cancel()
	noSubs(t, c, o, base+"r", base+"c1", base+"c2")
}

// A glob covers immediate children only, with its own parameters.
func TestGlobImmediateChildrenOnly(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(listener("d/deep/x", "deep") + "---\n" + listener("d/p?k=1", "other-params") + "---\n" + listener("d/kid", "kid"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"d/*", r.handle)
	r.expect(client.Updated, lis+"d/kid", `"kid"`)
	o.Apply(listener("d/deep/y", "deep2") + "---\n" + listener("d/q?k=1", "other2"))
	barrier(t, c, o)
	r.none()
}

// A redirect target another watcher holds directly keeps its subscription
// when the redirect's watcher goes.
func TestRedirectTargetSharedWithAnotherWatcher(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(lisRedirect("via", "shared") + "---\n" + listener("shared", "S"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	direct, redirected := newRecorder(t), newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"shared", direct.handle)
	cancel, _ := c.Watch(t.Context(), resource.ListenerURL, lis+"via", redirected.handle)
	direct.expect(client.Updated, lis+"shared", `"S"`)
	redirected.expect(client.Updated, lis+"via", `"S"`)
	cancel()
	noSubs(t, c, o, lis+"via")
	if n := o.Subscriptions(lis + "shared"); n != 1 {
		t.Errorf("shared target: %d subscriptions", n)
	}
	o.Apply(listener("shared", "S2"))
	direct.expect(client.Updated, lis+"shared", `"S2"`)
	redirected.none()
}
