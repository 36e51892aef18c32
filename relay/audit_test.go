package relay_test

import (
	"fmt"
	"github.com/xdsd/xdsd/internal/testutil"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// A parameter set's last downstream leaves while another parameter set of
// the same name is still followed: its variant must leave the cache with
// its upstream subscription, or a later downstream with those parameters
// is answered at once with a copy the relay stopped following (stale
// after an upstream change, or deleted upstream).
func TestVariantOfAnEndedParameterSetIsNotServedStale(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply(routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
			rl := startRelay(t, o.Addr, sotw)
			test := protocoltest.NewDelta(t, rl.conn, nil)
			test.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
			test.Ack(test.Recv())
			prod := protocoltest.NewDelta(t, rl.conn, nil)
			prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			prod.Ack(prod.Recv())
			testutil.Eventually(t, "two upstream subscriptions", func() bool { return o.Subscriptions("r") == 2 })
			prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			testutil.Eventually(t, "the env=prod upstream subscription ended", func() bool { return o.Subscriptions("r") == 1 })
			o.Apply(routeVariant("env=prod", "prod2") + "---\n" + routeVariant("env=test", "test1"))
			again := protocoltest.NewDelta(t, rl.conn, nil)
			again.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			r := again.Recv()
			if len(r.Resources) != 1 || !strings.Contains(r.Resources[0].Resource.String(), "prod2") {
				t.Fatalf("env=prod after it changed upstream: %s %v", protocoltest.Describe(r), r.Resources)
			}
		})
	}
}

// view is what a delta downstream holds, by name: the tag (a cluster's
// alt_stat_name, a route's first virtual host) of what it was last sent.
type view struct {
	t       *testing.T
	d       *protocoltest.Delta
	have    map[string]string
	removed []string // every removal, in order
}

func newView(t *testing.T, d *protocoltest.Delta) *view {
	return &view{t: t, d: d, have: map[string]string{}}
}

func tagOf(res *discoveryv3.Resource) string {
	s := res.Resource.String()
	for _, k := range []string{"alt_stat_name:\"", "virtual_hosts:{name:\""} {
		if i := strings.Index(s, k); i >= 0 {
			rest := s[i+len(k):]
			return rest[:strings.Index(rest, "\"")]
		}
	}
	return "?"
}

// until applies responses until the view holds want exactly.
func (v *view) until(want map[string]string) {
	v.t.Helper()
	deadline := time.After(protocoltest.Wait)
	for fmt.Sprint(v.have) != fmt.Sprint(want) {
		select {
		case r := <-v.d.Resps:
			protocoltest.CheckDelta(v.t, r)
			for _, res := range r.Resources {
				if res.Resource != nil {
					n := res.Name
					if n == "" {
						n = res.GetResourceName().GetName()
					}
					v.have[n] = tagOf(res)
				}
			}
			for _, n := range r.RemovedResources {
				delete(v.have, n)
				v.removed = append(v.removed, n)
			}
			for _, n := range r.RemovedResourceNames {
				delete(v.have, n.Name)
				v.removed = append(v.removed, n.Name)
			}
			v.d.Ack(r)
		case err := <-v.d.Errs:
			v.t.Fatalf("stream ended: %v", err)
		case <-deadline:
			v.t.Fatalf("holds %v, want %v (removals %v)", v.have, want, v.removed)
		}
	}
}

func subParams(d *protocoltest.Delta, typeURL, name string, kv ...string) {
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc(name, kv...)}})
}

func unsubParams(d *protocoltest.Delta, typeURL, name string, kv ...string) {
	d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc(name, kv...)}})
}

// The origin restarts with changed content after an outage during which
// downstreams came and went: every downstream ends with the origin's new
// truth — including removals that did happen upstream (a resource deleted,
// the variant of a parameter set deleted) — and nobody hears of a removal
// the outage alone caused.
func TestOutageThenChangedOrigin(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply(clusterDoc("c", "c1") + "---\n" + clusterDoc("k", "k1") + "---\n" + clusterDoc("x", "x1") + "---\n" +
				routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
			rl := startRelay(t, o.Addr, sotw)
			a := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			a.d.Sub(resource.ClusterURL, "c", "k", "x")
			subParams(a.d, resource.RouteURL, "r", "env", "prod")
			a.until(map[string]string{"c": "c1", "k": "k1", "x": "x1", "r": "prod1"})
			b := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			subParams(b.d, resource.RouteURL, "r", "env", "test")
			b.d.Sub(resource.ClusterURL, "k")
			b.until(map[string]string{"r": "test1", "k": "k1"})

			o.Stop()
			rl.awaitOutage(t)
			// During the outage: a lets go of x and of its route, and
			// takes its route back; a new client is served from the cache.
			a.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"x"}})
			delete(a.have, "x")
			unsubParams(a.d, resource.RouteURL, "r", "env", "prod")
			subParams(a.d, resource.RouteURL, "r", "env", "prod")
			n := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			n.d.Sub(resource.ClusterURL, "c", "k")
			subParams(n.d, resource.RouteURL, "r", "env", "test")
			n.until(map[string]string{"c": "c1", "k": "k1", "r": "test1"})

			// Meanwhile upstream: c deleted, the env=test variant deleted,
			// an env=qa variant added, env=prod changed; k unchanged.
			o.Remove("cds", "c")
			o.Remove("rds", "r")
			o.Apply(routeVariant("env=prod", "prod2") + "---\n" + routeVariant("env=qa", "qa2"))
			o.Start()

			a.until(map[string]string{"k": "k1", "r": "prod2"})
			if !sotw {
				// (SotW has no word for a route that does not exist.)
				b.until(map[string]string{"k": "k1"})
				n.until(map[string]string{"k": "k1"})
			} else {
				n.until(map[string]string{"k": "k1", "r": "test1"}) // c removed
			}
			for _, v := range []*view{a, b, n} {
				for _, r := range v.removed {
					if r == "k" || r == "r" && v == a {
						t.Errorf("removal of %s, which only the outage caused: %v", r, v.removed)
					}
				}
			}
			qa := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			subParams(qa.d, resource.RouteURL, "r", "env", "qa")
			qa.until(map[string]string{"r": "qa2"})
			// Nothing cached that nobody follows: x went.
			_, vs, _ := rl.r.Resources(t.Context())
			for _, v := range vs {
				if v.Name == "x" || v.Name == "c" {
					t.Errorf("%s still cached", v.Name)
				}
			}
		})
	}
}

// Many downstream streams, SotW and delta, subscribe to and let go of the
// same names, with and without parameters, while the origin changes them:
// each converges to the latest variant for its parameters, and once they
// have all gone the relay holds no upstream subscription.
func TestChurnConvergesAndLeaksNothing(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			gen := func(g int) string {
				return clusterDoc("c", fmt.Sprint("c", g)) + "---\n" + routeVariant("env=prod", fmt.Sprint("prod", g)) + "---\n" + routeVariant("env=test", fmt.Sprint("test", g))
			}
			o.Apply(gen(0))
			rl := startRelay(t, o.Addr, sotw)
			const streams, rounds = 16, 20
			envs := []string{"prod", "test"}
			var wg sync.WaitGroup
			done := make(chan struct{})
			wg.Add(1)
			final := 0
			go func() {
				defer wg.Done()
				for g := 1; ; g++ {
					select {
					case <-done:
						return
					default:
					}
					o.Apply(gen(g))
					final = g
				}
			}()
			var cwg sync.WaitGroup
			views := make([]*view, streams)
			sviews := make([]*protocoltest.SotW, streams)
			for i := range streams {
				env := envs[i%2]
				if i%4 < 2 {
					v := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
					views[i] = v
					cwg.Add(1)
					go func() {
						defer cwg.Done()
						for range rounds {
							v.d.Sub(resource.ClusterURL, "c")
							subParams(v.d, resource.RouteURL, "r", "env", env)
							v.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"c"}})
							unsubParams(v.d, resource.RouteURL, "r", "env", env)
						}
						v.d.Sub(resource.ClusterURL, "c")
						subParams(v.d, resource.RouteURL, "r", "env", env)
					}()
					continue
				}
				s := protocoltest.NewSotW(t, rl.conn, protocoltest.Node(fmt.Sprint("s", i), map[string]string{"env": env}))
				sviews[i] = s
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					for j := range rounds {
						names := []string{"r"}
						if j%2 == 1 {
							names = []string{}
						}
						s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: names})
					}
					s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{"r"}})
				}()
			}
			cwg.Wait()
			close(done)
			wg.Wait()
			for i, v := range views {
				if v == nil {
					continue
				}
				delete(v.have, "r") // the last subscription's answer is what counts
				delete(v.have, "c")
				v.until(map[string]string{"c": fmt.Sprint("c", final), "r": fmt.Sprint(envs[i%2], final)})
			}
			for i, s := range sviews {
				if s == nil {
					continue
				}
				want := fmt.Sprint(envs[i%2], final)
				deadline := time.After(protocoltest.Wait)
				for got := ""; got != want; {
					select {
					case r := <-s.Resps:
						s.Ack(r, "r")
						got = ""
						if len(r.Resources) == 1 && strings.Contains(string(r.Resources[0].Value), want) {
							got = want
						}
					case <-deadline:
						t.Fatalf("sotw stream %d never got %s", i, want)
					}
				}
			}
			if got := o.Subscriptions("r"); got != 2 {
				t.Errorf("origin holds %d subscriptions to r, want 2", got)
			}
			// Everyone leaves.
			for _, v := range views {
				if v != nil {
					v.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"c"}})
					for _, env := range envs {
						unsubParams(v.d, resource.RouteURL, "r", "env", env)
					}
				}
			}
			for _, s := range sviews {
				if s != nil {
					s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNames: []string{}})
				}
			}
			testutil.Eventually(t, "no upstream subscription to r or c", func() bool {
				return o.Subscriptions("r")+o.Subscriptions("c") == 0
			})
			testutil.Eventually(t, "an empty cache", func() bool {
				_, vs, _ := rl.r.Resources(t.Context())
				return len(vs) == 0
			})
		})
	}
}

// Downstreams that all leave during an outage leave nothing behind once
// the origin is back: no upstream subscription (origin's clients, the
// relay's gauge) and no cache entry; a do_not_cache resource is fetched
// afresh for a subscriber after the reconnection, not served from the
// copy from before the outage.
func TestLeaveDuringOutageAndDoNotCacheAfter(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply("do_not_cache: true\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: p\n  alt_stat_name: p1\n---\n" +
				clusterDoc("c", "c1") + "---\n" + routeVariant("env=prod", "prod1"))
			rl := startRelay(t, o.Addr, sotw)
			a := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			a.d.Sub(resource.ClusterURL, "c", "p")
			subParams(a.d, resource.RouteURL, "r", "env", "prod")
			a.until(map[string]string{"c": "c1", "p": "p1", "r": "prod1"})
			keep := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			keep.d.Sub(resource.ClusterURL, "p")
			keep.until(map[string]string{"p": "p1"})
			o.Stop()
			rl.awaitOutage(t)
			a.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{"c", "p"}})
			unsubParams(a.d, resource.RouteURL, "r", "env", "prod")
			testutil.Eventually(t, "the relay took the unsubscriptions", func() bool {
				n := 0
				for _, u := range rl.r.Upstreams() {
					n += u.Subscriptions
				}
				return n == 1
			})
			o.Apply("do_not_cache: true\nresource:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: p\n  alt_stat_name: p2\n")
			o.Start()
			keep.until(map[string]string{"p": "p2"})
			testutil.Eventually(t, "no upstream subscription but p's", func() bool {
				return o.Subscriptions("c")+o.Subscriptions("r") == 0 && o.Subscriptions("p") == 1
			})
			testutil.Eventually(t, "only p cached", func() bool {
				_, vs, _ := rl.r.Resources(t.Context())
				return len(vs) == 1 && vs[0].Name == "p"
			})
			gauge := 0.0
			mfs, _ := rl.reg.Gather()
			for _, mf := range mfs {
				if mf.GetName() == "xdsd_relay_upstream_subscriptions" {
					for _, m := range mf.Metric {
						gauge += m.GetGauge().GetValue()
					}
				}
			}
			if gauge != 1 {
				t.Errorf("upstream subscriptions gauge %v, want 1", gauge)
			}
			fresh := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
			fresh.d.Sub(resource.ClusterURL, "p")
			fresh.until(map[string]string{"p": "p2"})
		})
	}
}

// A glob collection and an on-demand VHDS name through a relay: members
// and virtual hosts come, change and go as at the origin, and a second
// downstream is answered from the cache.
func TestGlobAndVHDSThroughARelay(t *testing.T) {
	const g = "xdstp://a/envoy.config.cluster.v3.Cluster/g/*"
	m := func(n string) string { return "xdstp://a/envoy.config.cluster.v3.Cluster/g/" + n }
	vh := func(name, tag string, domains string) string {
		return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: %s\ndomains: [%q]\nrequest_headers_to_remove: [%q]\n", name, domains, tag)
	}
	o := testorigin.Start(t)
	o.Apply(clusterDoc(m("1"), "one1") + "---\n" + clusterDoc(m("2"), "two1") + "---\n" + vh("rc/web", "web1", "*.example.org"))
	rl := startRelay(t, o.Addr, false)
	a := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	a.d.Sub(resource.ClusterURL, g)
	a.until(map[string]string{m("1"): "one1", m("2"): "two1"})
	va := protocoltest.NewDelta(t, rl.conn, nil)
	va.Sub(resource.VirtualHostURL, "rc/a.example.org")
	if got := protocoltest.Describe(va.Recv()); got != "route.v3.VirtualHost: rc/web aliases=rc/a.example.org" {
		t.Fatalf("VHDS through the relay: %s", got)
	}
	o.Apply(clusterDoc(m("2"), "two2") + "---\n" + clusterDoc(m("3"), "three2"))
	o.Remove("cds", m("1"))
	a.until(map[string]string{m("2"): "two2", m("3"): "three2"})
	b := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	b.d.Sub(resource.ClusterURL, g)
	b.until(map[string]string{m("2"): "two2", m("3"): "three2"})
	vb := protocoltest.NewDelta(t, rl.conn, nil)
	vb.Sub(resource.VirtualHostURL, "rc/b.example.org")
	if got := protocoltest.Describe(vb.Recv()); got != "route.v3.VirtualHost: rc/web aliases=rc/b.example.org" {
		t.Fatalf("VHDS second name through the relay: %s", got)
	}
	o.Remove("vhds", "rc/web")
	for _, d := range []*protocoltest.Delta{va, vb} {
		if got := protocoltest.Describe(d.Recv()); got != "route.v3.VirtualHost: -rc/web" && !strings.Contains(got, "-rc/") {
			t.Fatalf("virtual host removed at the origin: %s", got)
		}
	}
	// All leave: nothing stays subscribed upstream.
	for _, v := range []*view{a, b} {
		v.d.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{g}})
	}
	va.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNamesUnsubscribe: []string{"rc/a.example.org"}})
	vb.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNamesUnsubscribe: []string{"rc/b.example.org"}})
	testutil.Eventually(t, "no upstream subscription", func() bool {
		n := 0
		for _, u := range rl.r.Upstreams() {
			n += u.Subscriptions
		}
		return n == 0 && o.Subscriptions(g)+o.Subscriptions("rc/a.example.org")+o.Subscriptions("rc/b.example.org") == 0
	})
	testutil.Eventually(t, "an empty cache", func() bool {
		_, vs, _ := rl.r.Resources(t.Context())
		return len(vs) == 0
	})
}

// A chain of relays with parameters through an outage of the origin: the
// downstream of the second relay keeps its variant, hears of no removal,
// and gets the change made meanwhile, and a variant deleted meanwhile is
// removed.
func TestChainWithParamsThroughAnOutage(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
	first := startRelay(t, o.Addr, false)
	second := startRelay(t, first.addr, true)
	p := newView(t, protocoltest.NewDelta(t, second.conn, nil))
	subParams(p.d, resource.RouteURL, "r", "env", "prod")
	p.until(map[string]string{"r": "prod1"})
	q := newView(t, protocoltest.NewDelta(t, second.conn, nil))
	subParams(q.d, resource.RouteURL, "r", "env", "test")
	q.until(map[string]string{"r": "test1"})
	o.Stop()
	first.awaitOutage(t)
	late := newView(t, protocoltest.NewDelta(t, second.conn, nil))
	subParams(late.d, resource.RouteURL, "r", "env", "prod")
	late.until(map[string]string{"r": "prod1"})
	o.Remove("rds", "r")
	o.Apply(routeVariant("env=prod", "prod2"))
	o.Start()
	p.until(map[string]string{"r": "prod2"})
	late.until(map[string]string{"r": "prod2"})
	if len(p.removed)+len(late.removed) > 0 {
		t.Errorf("removals the outage caused: %v %v", p.removed, late.removed)
	}
}

// A parameter set's last downstream leaves during an outage while another
// parameter set of the name is still followed: its variant lingers (a
// client restarted meanwhile is served it) and leaves the cache once the
// origin is back.
func TestVariantLingersThroughAnOutage(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
	rl := startRelay(t, o.Addr, false)
	q := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	subParams(q.d, resource.RouteURL, "r", "env", "test")
	q.until(map[string]string{"r": "test1"})
	p := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	subParams(p.d, resource.RouteURL, "r", "env", "prod")
	p.until(map[string]string{"r": "prod1"})
	o.Stop()
	rl.awaitOutage(t)
	unsubParams(p.d, resource.RouteURL, "r", "env", "prod")
	restarted := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	subParams(restarted.d, resource.RouteURL, "r", "env", "prod")
	restarted.until(map[string]string{"r": "prod1"})
	unsubParams(restarted.d, resource.RouteURL, "r", "env", "prod")
	o.Apply(routeVariant("env=test", "test2"))
	o.Start()
	q.until(map[string]string{"r": "test2"})
	testutil.Eventually(t, "only the env=test variant cached", func() bool {
		_, vs, _ := rl.r.Resources(t.Context())
		return len(vs) == 1 && vs[0].Constraints.Key() == "env=test"
	})
}
