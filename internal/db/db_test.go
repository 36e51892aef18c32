package db

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

type counter struct{ n atomic.Int32 }

func (c *counter) notify() { c.n.Add(1) }

func newSub() (*Subscriber, *counter) {
	c := &counter{}
	return NewSubscriber(c.notify), c
}

func pendingNames(s *Subscriber) map[string]bool {
	p, _ := s.Drain()
	out := map[string]bool{}
	for c := range p {
		out[c.Name] = true
	}
	return out
}

func TestNamedSubscriptionAndOneSignalPerUpdate(t *testing.T) {
	d := New(Hooks{})
	s, c := newSub()
	d.Subscribe(s, NewSub(resource.ClusterURL, "a", nil))
	d.Subscribe(s, NewSub(resource.ClusterURL, "b", nil))
	other, oc := newSub()
	d.Subscribe(other, NewSub(resource.ClusterURL, "z", nil))

	d.Update(Update{Rev: 7, Puts: []*resource.Variant{storetest.Cluster("a", "", "1"), storetest.Cluster("b", "", "1"), storetest.Cluster("c", "", "1")}})
	if c.n.Load() != 1 || oc.n.Load() != 0 {
		t.Fatalf("signals: subscriber %d (want 1), other %d (want 0)", c.n.Load(), oc.n.Load())
	}
	if got := pendingNames(s); len(got) != 2 || !got["a"] || !got["b"] {
		t.Fatalf("pending = %v", got)
	}
	if got := pendingNames(s); len(got) != 0 {
		t.Fatalf("Drain did not clear: %v", got)
	}
	d.Read(func(r *Reader) {
		if r.Rev() != 7 || r.Get(resource.ClusterURL, "a", nil) == nil || r.Get(resource.ClusterURL, "z", nil) != nil {
			t.Errorf("read: rev %d", r.Rev())
		}
	})
	// A delete of a resource someone subscribes marks them too.
	d.Update(Update{ResourceDeletes: []Key{{Type: resource.ClusterURL, Name: "a"}}})
	if got := pendingNames(s); !got["a"] {
		t.Errorf("removal not marked: %v", got)
	}
}

func TestWildcard(t *testing.T) {
	d := New(Hooks{})
	s, _ := newSub()
	d.Subscribe(s, NewSub(resource.ClusterURL, Wildcard, nil))
	d.Update(Update{Puts: []*resource.Variant{storetest.Cluster("a", "", "1"), storetest.Route("r", "", "1")}})
	if got := pendingNames(s); len(got) != 1 || !got["a"] {
		t.Fatalf("pending = %v", got)
	}
	var all []string
	d.Read(func(r *Reader) {
		r.All(resource.ClusterURL, nil, func(v *resource.Variant) { all = append(all, v.Name) })
	})
	if len(all) != 1 {
		t.Errorf("All = %v", all)
	}
}

// TP1: a glob covers the immediate children of its path with identical
// context parameters (docs/protocol.md §3.4, §3.7).
func TestGlob(t *testing.T) {
	d := New(Hooks{})
	s, _ := newSub()
	const glob = "xdstp://a/envoy.config.cluster.v3.Cluster/foo/*?p=1"
	d.Subscribe(s, NewSub(resource.ClusterURL, glob, nil))
	member := "xdstp://a/envoy.config.cluster.v3.Cluster/foo/bar?p=1"
	d.Update(Update{Puts: []*resource.Variant{
		storetest.Cluster(member, "", "1"),
		storetest.Cluster("xdstp://a/envoy.config.cluster.v3.Cluster/foo/bar", "", "1"),
		storetest.Cluster("xdstp://a/envoy.config.cluster.v3.Cluster/foo/x/y?p=1", "", "1"),
		storetest.Cluster("xdstp://a/envoy.config.cluster.v3.Cluster/foo/baz?p=2", "", "1"),
	}})
	if got := pendingNames(s); len(got) != 1 || !got[member] {
		t.Fatalf("pending = %v, want only %s", got, member)
	}
	var members []string
	d.Read(func(r *Reader) {
		r.GlobMembers(resource.ClusterURL, glob, nil, func(v *resource.Variant) { members = append(members, v.Name) })
	})
	if len(members) != 1 || members[0] != member {
		t.Errorf("members = %v", members)
	}
	// Removing the member marks the glob subscriber, and leaves the glob empty.
	d.Update(Update{ResourceDeletes: []Key{{Type: resource.ClusterURL, Name: member}}})
	if got := pendingNames(s); !got[member] {
		t.Errorf("member removal not marked: %v", got)
	}
	members = nil
	d.Read(func(r *Reader) {
		r.GlobMembers(resource.ClusterURL, glob, nil, func(v *resource.Variant) { members = append(members, v.Name) })
	})
	if len(members) != 0 {
		t.Errorf("members after removal = %v", members)
	}
	if g, ok := InGlob(member); !ok || g != glob {
		t.Errorf("InGlob(%s) = %s %v", member, g, ok)
	}
}

// A member subscribed by its own name outlives its glob (no variants, no
// glob subscribers): when it comes back, a new glob subscriber must still
// find it and be told of it (the entry must not keep a dead glob).
func TestGlobOutlivedByMember(t *testing.T) {
	d := New(Hooks{})
	const glob = "xdstp://a/envoy.config.cluster.v3.Cluster/foo/*"
	const member = "xdstp://a/envoy.config.cluster.v3.Cluster/foo/x"
	byName, _ := newSub()
	d.Subscribe(byName, NewSub(resource.ClusterURL, member, nil))
	d.Update(Update{Puts: []*resource.Variant{storetest.Cluster(member, "", "1")}})
	d.Update(Update{ResourceDeletes: []Key{{Type: resource.ClusterURL, Name: member}}}) // the glob has no member and no subscriber: gone
	g, _ := newSub()
	d.Subscribe(g, NewSub(resource.ClusterURL, glob, nil))
	d.Update(Update{Puts: []*resource.Variant{storetest.Cluster(member, "", "2")}})
	if got := pendingNames(g); !got[member] {
		t.Errorf("the glob subscriber was not told of the returning member: %v", got)
	}
	var members []string
	d.Read(func(r *Reader) {
		r.GlobMembers(resource.ClusterURL, glob, nil, func(v *resource.Variant) { members = append(members, v.Name) })
	})
	if len(members) != 1 {
		t.Errorf("members = %v, want [%s]", members, member)
	}
}

// Only an unescaped trailing "/*" makes a glob: a parameter value holding
// "/*" is an ordinary name.
func TestIsGlob(t *testing.T) {
	for n, want := range map[string]bool{
		"xdstp://a/envoy.config.cluster.v3.Cluster/foo/*":       true,
		"xdstp://a/envoy.config.cluster.v3.Cluster/foo/*?p=1":   true,
		"xdstp://a/envoy.config.cluster.v3.Cluster/foo?x=/*":    false,
		"xdstp://a/envoy.config.cluster.v3.Cluster/foo?x=a/*?b": false,
		"legacy/*": false,
		Wildcard:   false,
	} {
		if got := IsGlob(n); got != want {
			t.Errorf("IsGlob(%q) = %v, want %v", n, got, want)
		}
	}
	d := New(Hooks{})
	s, _ := newSub()
	const odd = "xdstp://a/envoy.config.cluster.v3.Cluster/foo?x=/*"
	d.Subscribe(s, NewSub(resource.ClusterURL, odd, nil))
	d.Update(Update{Puts: []*resource.Variant{storetest.Cluster(odd, "", "1")}})
	if got := pendingNames(s); !got[odd] {
		t.Errorf("a subscriber of %s was not marked: %v", odd, got)
	}
}

// TP2's four variants: each subscriber gets the one its parameters match.
func TestVariantSelection(t *testing.T) {
	d := New(Hooks{})
	d.Update(Update{Puts: []*resource.Variant{
		storetest.Route("r", "env!=prod && version!=v1", "none"),
		storetest.Route("r", "env=prod && version!=v1", "prod"),
		storetest.Route("r", "env!=prod && version=v1", "v1"),
		storetest.Route("r", "env=prod && version=v1", "both"),
	}})
	for _, tc := range []struct {
		p    constraint.Params
		want string
	}{
		{nil, "env!=prod && version!=v1"},
		{constraint.Params{"env": "prod"}, "env=prod && version!=v1"},
		{constraint.Params{"env": "test", "version": "v1"}, "env!=prod && version=v1"},
		{constraint.Params{"env": "prod", "version": "v1", "zone": "a"}, "env=prod && version=v1"},
	} {
		d.Read(func(r *Reader) {
			v := r.Get(resource.RouteURL, "r", tc.p)
			if v == nil || !v.Constraints.Equal(constraint.MustParse(tc.want)) {
				t.Errorf("params %v got %v, want %s", tc.p, v, tc.want)
			}
		})
	}
}

func vhost(n string, domains ...string) *resource.Variant {
	body, err := resource.Marshal(&routev3.VirtualHost{Name: n, Domains: domains})
	if err != nil {
		panic(err)
	}
	return resource.NewVariant(resource.ForURL(resource.VirtualHostURL), n, constraint.Constraints{}, "", "", body)
}

func TestVirtualHostResolution(t *testing.T) {
	d := New(Hooks{})
	s, _ := newSub()
	d.Subscribe(s, NewSub(resource.VirtualHostURL, "rc/unknown.org", nil))
	d.Update(Update{Puts: []*resource.Variant{
		vhost("rc/exact", "foo.com", "Foo.org:8080"),
		vhost("rc/suffix", "*.bar.com", "*-svc.bar.com"),
		vhost("rc/prefix", "api.*"),
		vhost("rc/any", "*"),
		vhost("other/x", "foo.com"),
	}})
	if got := pendingNames(s); !got["rc/any"] || got["other/x"] {
		t.Errorf("VHDS subscriber under rc/ marked with %v", got)
	}
	for host, want := range map[string]string{
		"rc/foo.com":        "rc/exact",
		"rc/FOO.COM":        "rc/exact",
		"rc/foo.org:8080":   "rc/exact",
		"rc/a.bar.com":      "rc/suffix",
		"rc/x-svc.bar.com":  "rc/suffix",
		"rc/api.example":    "rc/prefix",
		"rc/unknown.org":    "rc/any",
		"rc/bar.com":        "rc/any",   // *.bar.com needs a non-empty match
		"rc/exact":          "rc/exact", // by name
		"nope/foo.com":      "",
		"other/foo.com":     "other/x",
		"other/nothing.com": "",
	} {
		d.Read(func(r *Reader) {
			v := r.ResolveVirtualHost(host, nil)
			got := ""
			if v != nil {
				got = v.Name
			}
			if got != want {
				t.Errorf("resolve %s = %q, want %q", host, got, want)
			}
		})
	}
	// Removing the catch-all reaches the subscriber whose alias it served.
	d.Update(Update{ResourceDeletes: []Key{{Type: resource.VirtualHostURL, Name: "rc/any"}}})
	if got := pendingNames(s); !got["rc/any"] {
		t.Errorf("removal not marked: %v", got)
	}
	d.Read(func(r *Reader) {
		if v := r.ResolveVirtualHost("rc/unknown.org", nil); v != nil {
			t.Errorf("resolved after removal: %v", v.Name)
		}
	})
}

func TestInterestHooks(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	d := New(Hooks{Interest: func(i Sub, on bool) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, fmt.Sprintf("%v %s %s", on, i.Name, i.ParamsKey))
	}})
	a, _ := newSub()
	b, _ := newSub()
	prod := constraint.Params{"env": "prod"}
	d.Subscribe(a, NewSub(resource.ClusterURL, "x", prod))
	d.Subscribe(b, NewSub(resource.ClusterURL, "x", prod))
	d.Subscribe(b, NewSub(resource.ClusterURL, "x", constraint.Params{"env": "test"}))
	d.Unsubscribe(a, NewSub(resource.ClusterURL, "x", prod))
	// Undoing what was never subscribed changes nothing and fires nothing.
	d.Unsubscribe(a, NewSub(resource.ClusterURL, "x", prod))
	d.Unsubscribe(a, NewSub(resource.ClusterURL, "never", nil))
	d.Unsubscribe(a, NewSub("type.googleapis.com/unknown", "x", nil))
	d.Unsubscribe(b, NewSub(resource.ClusterURL, "x", prod))
	d.Unsubscribe(b, NewSub(resource.ClusterURL, "x", constraint.Params{"env": "test"}))
	want := []string{"true x env=prod", "true x env=test", "false x env=prod", "false x env=test"}
	if fmt.Sprint(got[:2]) != fmt.Sprint(want[:2]) || len(got) != 4 {
		t.Fatalf("hooks = %q, want %q", got, want)
	}
	if !((got[2] == want[2] && got[3] == want[3]) || (got[2] == want[3] && got[3] == want[2])) {
		t.Fatalf("hooks = %q, want %q", got, want)
	}
	if len(d.interest) != 0 || len(d.tables[resource.ClusterURL].entries) != 0 {
		t.Errorf("leftovers: interest %v entries %v", d.interest, d.tables[resource.ClusterURL].entries)
	}
}

func TestResetAndCleanup(t *testing.T) {
	d := New(Hooks{})
	s, _ := newSub()
	g := "xdstp://a/envoy.config.cluster.v3.Cluster/*"
	d.Subscribe(s, NewSub(resource.ClusterURL, g, nil))
	d.Subscribe(s, NewSub(resource.VirtualHostURL, "rc/foo.com", nil))
	d.Update(Update{Puts: []*resource.Variant{storetest.Cluster("xdstp://a/envoy.config.cluster.v3.Cluster/m", "", "1"), vhost("rc/v", "foo.com"), storetest.Cluster("keep", "", "1")}})
	d.Update(Update{Reset: true, Puts: []*resource.Variant{storetest.Cluster("keep", "", "1")}})
	if got := pendingNames(s); len(got) != 2 {
		t.Errorf("reset marks = %v", got)
	}
	d.Unsubscribe(s, NewSub(resource.ClusterURL, g, nil))
	d.Unsubscribe(s, NewSub(resource.VirtualHostURL, "rc/foo.com", nil))
	ct, vt := d.tables[resource.ClusterURL], d.tables[resource.VirtualHostURL]
	if len(ct.entries) != 1 || len(ct.globs) != 0 || len(vt.entries) != 0 || len(vt.vhds) != 0 || len(d.interest) != 0 {
		t.Errorf("not cleaned up: clusters %d globs %d vhosts %d vhds %d interest %d", len(ct.entries), len(ct.globs), len(vt.entries), len(vt.vhds), len(d.interest))
	}
}

func TestConcurrentUse(t *testing.T) {
	d := New(Hooks{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 200 {
				d.Update(Update{Puts: []*resource.Variant{storetest.Cluster(fmt.Sprintf("c%d", i%10), "", fmt.Sprint(w, i))}})
			}
		}()
		go func() {
			defer wg.Done()
			s, _ := newSub()
			held := map[string]int{}
			for i := range 200 {
				n := fmt.Sprintf("c%d", i%10)
				d.Subscribe(s, NewSub(resource.ClusterURL, n, nil))
				held[n]++
				d.Read(func(r *Reader) { r.Get(resource.ClusterURL, n, nil) })
				s.Drain()
				if i%3 == 0 {
					d.Unsubscribe(s, NewSub(resource.ClusterURL, n, nil))
					held[n]--
				}
			}
			for n, k := range held {
				for range k {
					d.Unsubscribe(s, NewSub(resource.ClusterURL, n, nil))
				}
			}
		}()
	}
	wg.Wait()
	if n := len(d.tables[resource.ClusterURL].entries); n != 10 {
		t.Errorf("entries = %d", n)
	}
}

// The Interest hooks of one Interest alternate on, off, on… as its
// subscriptions start and stop, however many goroutines subscribe and
// unsubscribe at once; and each caller's hooks have run when its call
// returns. (A hook that saw on before off would leave a watched name
// unsubscribed upstream.)
func TestInterestHooksInOrderUnderConcurrency(t *testing.T) {
	var (
		mu   sync.Mutex
		on   = map[string]bool{}
		errs []string
	)
	d := New(Hooks{
		Interest: func(i Sub, up bool) {
			mu.Lock()
			defer mu.Unlock()
			if on[i.Name] == up {
				errs = append(errs, fmt.Sprintf("%s: Interest(%v) twice in a row", i.Name, up))
			}
			on[i.Name] = up
		},
		Subscribed: func(i Sub) {
			mu.Lock()
			defer mu.Unlock()
			if !on[i.Name] {
				errs = append(errs, fmt.Sprintf("%s: Subscribed before Interest(true) returned", i.Name))
			}
		},
	})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _ := newSub()
			for i := range 2000 {
				n := fmt.Sprintf("c%d", (i+w)%3)
				d.Subscribe(s, NewSub(resource.ClusterURL, n, nil))
				mu.Lock()
				if !on[n] {
					errs = append(errs, fmt.Sprintf("%s: subscribed, but its Interest is off", n))
				}
				mu.Unlock()
				d.Unsubscribe(s, NewSub(resource.ClusterURL, n, nil))
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d hook order errors, first: %s", len(errs), errs[0])
	}
	for n, up := range on {
		if up {
			t.Errorf("%s: Interest left on with no subscriber", n)
		}
	}
	if d.hookBusy || len(d.hookWait) > 0 {
		t.Errorf("hook queue left busy (%v) or waiting (%d)", d.hookBusy, len(d.hookWait))
	}
}

// Subscribed runs out of turn: it may subscribe in the db itself (a
// relay's or an application's callback starting a watch) without waiting
// for its own turn.
func TestSubscribedHookMaySubscribe(t *testing.T) {
	var d *DB
	s, _ := newSub()
	d = New(Hooks{
		Interest: func(Sub, bool) {},
		Subscribed: func(i Sub) {
			if i.Name == "a" {
				d.Subscribe(s, NewSub(resource.ClusterURL, "b", nil))
			}
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Subscribe(s, NewSub(resource.ClusterURL, "a", nil))
	}()
	select {
	case <-done:
	case <-time.After(testutil.Wait):
		t.Fatal("a Subscribed hook subscribing deadlocked")
	}
	if len(d.interest) != 2 {
		t.Errorf("interests %v, want a and b", d.interest)
	}
}

// A peer subscribing to types xdsd does not know leaves nothing behind once
// it unsubscribes: made-up type URLs cannot grow the db without end.
func TestUnknownTypeTablesAreCollected(t *testing.T) {
	d := New(Hooks{})
	s := NewSubscriber(func() {})
	for i := range 100 {
		u := fmt.Sprintf("type.googleapis.com/made.Up%d", i)
		d.Subscribe(s, NewSub(u, "x", nil))
		d.Subscribe(s, NewSub(u, Wildcard, nil))
		d.Unsubscribe(s, NewSub(u, "x", nil))
		d.Unsubscribe(s, NewSub(u, Wildcard, nil))
	}
	d.Subscribe(s, NewSub(resource.ClusterURL, "x", nil))
	d.Unsubscribe(s, NewSub(resource.ClusterURL, "x", nil))
	d.mu.RLock()
	defer d.mu.RUnlock()
	for u := range d.tables {
		if u != resource.ClusterURL {
			t.Errorf("table of %s left behind", u)
		}
	}
}
