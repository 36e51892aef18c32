package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// #alt=: after an outage the watcher returns to the primary only once the
// primary has answered for the name on its new stream. Deleted during the
// outage: the watcher is told Removed, never the stale value the cache held
// from before. Unchanged: the primary's value comes back (over delta, the
// client does not declare the version it holds, or the server would send
// nothing).
func TestAltReturnsOnlyOnThePrimarysWord(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			w := watchWithAlt(t, tr.sotw, false)
			cloud, primary, r := w.cloud, w.primary, w.r
			r.expect(client.Updated, primary, "P1")

			// An outage; back unchanged.
			cloud.Stop()
			r.expect(client.Updated, primary, "from-alt")
			cloud.Start()
			if e := r.expect(client.Updated, primary, "P1"); len(e.Via) != 0 {
				t.Errorf("back on the primary, via %v", e.Via)
			}

			// An outage during which the primary's resource is deleted.
			cloud.Stop()
			r.expect(client.Updated, primary, "from-alt")
			cloud.Remove("cds", primary)
			cloud.Start()
			r.expect(client.Removed, primary, "")
			r.none(w.settled(t))
		})
	}
}

// #alt= with the primary authority unreachable from the start: the watcher
// is served the fallback, and returns to the primary once it is up and
// has answered for the name — over delta too, where nothing was held to
// declare.
func TestAltFromTheStartReturnsToThePrimary(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			w := watchWithAlt(t, tr.sotw, true)
			cloud, primary, alt, r := w.cloud, w.primary, w.alt, w.r
			if e := r.expect(client.Updated, primary, "from-alt"); len(e.Via) != 1 || e.Via[0] != alt {
				t.Errorf("on the fallback, via %v", e.Via)
			}
			cloud.Start()
			if e := r.expect(client.Updated, primary, "P1"); len(e.Via) != 0 {
				t.Errorf("back on the primary, via %v", e.Via)
			}
			r.none(w.settled(t))
		})
	}
}

// altWatch is a watch of primary#alt=alt: cloud holds primary ("P1"),
// onprem holds alt ("from-alt").
type altWatch struct {
	c             *client.Client
	cloud, onprem *testorigin.Origin
	primary, alt  string
	r             *recorder
}

// watchWithAlt starts the two authorities and the watch; with down, cloud
// is stopped before the watch. The watch ends with the test.
func watchWithAlt(t *testing.T, sotw, down bool) *altWatch {
	t.Helper()
	w := &altWatch{onprem: testorigin.Start(t), cloud: testorigin.Start(t), r: newRecorder(t),
		alt: "xdstp://onprem/envoy.config.cluster.v3.Cluster/x", primary: "xdstp://cloud/envoy.config.cluster.v3.Cluster/x"}
	w.onprem.Apply(cluster(w.alt, "from-alt"))
	w.cloud.Apply(cluster(w.primary, "P1"))
	if down {
		w.cloud.Stop()
	}
	b := bs{servers: []string{w.onprem.Addr}, sotw: sotw, authorities: map[string][]string{"cloud": {w.cloud.Addr}, "onprem": {w.onprem.Addr}}}.build(t)
	w.c = newClient(t, b, client.Options{AltTimeout: 200 * time.Millisecond})
	cancel, err := w.c.Watch(t.Context(), resource.ClusterURL, w.primary+"#alt="+w.alt, w.r.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel() })
	return w
}

// settled passes a barrier through both authorities.
func (w *altWatch) settled(t *testing.T) settled {
	t.Helper()
	barrierIn(t, w.c, w.onprem, "onprem")
	return barrierIn(t, w.c, w.cloud, "cloud")
}

// #alt= on a glob is not served (failover of a glob is not defined): it
// is refused rather than silently ignored.
func TestAltOnGlobRefused(t *testing.T) {
	o := testorigin.Start(t)
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
	onprem, cloud := testorigin.Start(t), testorigin.Start(t)
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
	<-cancel()
	noSubs(t, c, onprem, alt)
	cloud.Start()
	r.none(barrierIn(t, c, cloud, "cloud"), barrierIn(t, c, onprem, "onprem"))
}

// #alt=: when the name's authority cannot be reached for AltTimeout, the
// alt URL is fetched instead; the client returns to the primary when it is
// back.
func TestAltFailoverAndReturn(t *testing.T) {
	onprem := testorigin.Start(t)
	alt := "xdstp://onprem/envoy.config.cluster.v3.Cluster/x"
	onprem.Apply(cluster(alt, "from-alt"))
	cloudAddr := freeAddr(t)
	b := bs{servers: []string{onprem.Addr}, authorities: map[string][]string{"cloud": {cloudAddr}, "onprem": {onprem.Addr}}}.build(t)
	c := newClient(t, b, client.Options{AltTimeout: 200 * time.Millisecond})
	primary := "xdstp://cloud/envoy.config.cluster.v3.Cluster/x"
	r := newRecorder(t)
	if _, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt="+alt, r.handle); err != nil {
		t.Fatal(err)
	}
	e := r.expect(client.Updated, primary, "from-alt")
	if len(e.Via) != 1 || e.Via[0] != alt {
		t.Errorf("via %v", e.Via)
	}
	cloud := testorigin.New(t, cloudAddr)
	cloud.Apply(cluster(primary, "from-primary"))
	cloud.Start()
	e = r.expect(client.Updated, primary, "from-primary")
	if len(e.Via) != 0 {
		t.Errorf("back on the primary, via %v", e.Via)
	}
}
