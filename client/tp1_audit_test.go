package client_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/servertest"
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
