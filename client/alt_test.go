package client_test

import (
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
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
			cloud, primary, _, r := watchWithAlt(t, tr.sotw, false)
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
			r.none()
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
			cloud, primary, alt, r := watchWithAlt(t, tr.sotw, true)
			if e := r.expect(client.Updated, primary, "from-alt"); len(e.Via) != 1 || e.Via[0] != alt {
				t.Errorf("on the fallback, via %v", e.Via)
			}
			cloud.Start()
			if e := r.expect(client.Updated, primary, "P1"); len(e.Via) != 0 {
				t.Errorf("back on the primary, via %v", e.Via)
			}
			r.none()
		})
	}
}

// watchWithAlt starts two authorities — cloud holding primary ("P1"),
// onprem holding alt ("from-alt") — and watches primary#alt=alt; with
// down, cloud is stopped before the watch. The watch ends with the test.
func watchWithAlt(t *testing.T, sotw, down bool) (cloud *servertest.Origin, primary, alt string, r *recorder) {
	t.Helper()
	onprem, cloud := servertest.Start(t), servertest.Start(t)
	alt = "xdstp://onprem/envoy.config.cluster.v3.Cluster/x"
	onprem.Apply(cluster(alt, "from-alt"))
	primary = "xdstp://cloud/envoy.config.cluster.v3.Cluster/x"
	cloud.Apply(cluster(primary, "P1"))
	if down {
		cloud.Stop()
	}
	b := bs{servers: []string{onprem.Addr}, sotw: sotw, authorities: map[string][]string{"cloud": {cloud.Addr}, "onprem": {onprem.Addr}}}.build(t)
	c := newClient(t, b, client.Options{AltTimeout: 200 * time.Millisecond})
	r = newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt="+alt, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel() })
	return cloud, primary, alt, r
}
