package client_test

import (
	"fmt"
	"strings"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// TP1 redirects: a ResourceLocator payload is followed (the event says
// through what); chains are bounded and loops reported.
func TestRedirects(t *testing.T) {
	o := testorigin.Start(t)
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

// A redirect's target must be of the watched type and in an authority the
// client knows: otherwise the watcher is told why, and nothing is
// subscribed.
func TestRedirectTargetChecked(t *testing.T) {
	o := testorigin.Start(t)
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

// TP1: "Glob collections may have individual resources redirected": a
// glob member whose payload is a ResourceLocator is followed, and the
// watcher is told the target's resource (via the redirect), never the
// locator itself.
func TestGlobMemberRedirected(t *testing.T) {
	o := testorigin.Start(t)
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
	<-cancel()
	noSubs(t, c, o, lis+"target2", lis+"g/*", lis+"g/loop", lis+"g/moved")
}

// A redirect whose target is deleted, then moved: the watcher is told
// Removed, then follows the new target; the old target's subscription is
// dropped, and all go on cancel.
func TestRedirectTargetDeletedAndMoved(t *testing.T) {
	o := testorigin.Start(t)
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
	<-cancel()
	noSubs(t, c, o, lis+"r")
}

// Loops and over-long chains are reported, and leave no subscription
// behind once cancelled.
func TestRedirectLoopAndChainLeaveNothing(t *testing.T) {
	o := testorigin.Start(t)
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
	loop.none(barrier(t, c, o))
	<-cl()
	<-cc()
	for _, n := range []string{"l1", "l2", "l3", "c0", "c1", "c2", "c3", "c4", "c5"} {
		noSubs(t, c, o, lis+n)
	}
}

// Federation: a redirect into another authority, on another server, is
// fetched there; moved back, that server's subscription is dropped.
func TestRedirectAcrossAuthorities(t *testing.T) {
	oa, ob := testorigin.Start(t), testorigin.Start(t)
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
	<-cb()
	if n := ob.Subscriptions(lisB + "t"); n != 0 {
		t.Errorf("b still holds %d subscriptions", n)
	}
	<-cancel()
	noSubs(t, c, oa, lis+"r", lis+"local")
}

// A redirect target another watcher holds directly keeps its subscription
// when the redirect's watcher goes.
func TestRedirectTargetSharedWithAnotherWatcher(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(lisRedirect("via", "shared") + "---\n" + listener("shared", "S"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	direct, redirected := newRecorder(t), newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"shared", direct.handle)
	cancel, _ := c.Watch(t.Context(), resource.ListenerURL, lis+"via", redirected.handle)
	direct.expect(client.Updated, lis+"shared", `"S"`)
	redirected.expect(client.Updated, lis+"via", `"S"`)
	<-cancel()
	noSubs(t, c, o, lis+"via")
	if n := o.Subscriptions(lis + "shared"); n != 1 {
		t.Errorf("shared target: %d subscriptions", n)
	}
	o.Apply(listener("shared", "S2"))
	direct.expect(client.Updated, lis+"shared", `"S2"`)
	redirected.none(barrier(t, c, o))
}

// A list collection may be redirected (TP1): WatchCollection and #entry=
// follow it, and follow it when it moves.
func TestListCollectionRedirected(t *testing.T) {
	o := testorigin.Start(t)
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
	<-cancel()
	noSubs(t, c, o, base+"r", base+"c1", base+"c2")
}
