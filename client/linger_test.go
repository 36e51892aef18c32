package client_test

import (
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §2.7 during an outage: the cache entries of watches ended
// while the upstream is down linger, so that a new watcher is served —
// but they keep their TTLs. One watched again is told Removed when its TTL
// passes, as a watched one would be; one nobody watches again leaves the
// cache then.
func TestLingeringEntryKeepsItsTTL(t *testing.T) {
	o := testorigin.Start(t)
	for _, n := range []string{"kept", "left"} {
		o.Apply("ttl: 2s\nresource:\n" + indent(cluster(n, "x")))
	}
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{DoesNotExistTimeout: -1})
	var cancels []client.CancelFunc
	for _, n := range []string{"kept", "left"} {
		r := newRecorder(t)
		cancel, err := c.Watch(t.Context(), resource.ClusterURL, n, r.handle)
		if err != nil {
			t.Fatal(err)
		}
		r.expect(client.Updated, n, "")
		cancels = append(cancels, cancel)
	}
	o.Stop()
	testutil.Eventually(t, "the upstream to go down", upstreamDown(c))
	for _, cancel := range cancels {
		<-cancel() // the upstream is down: the entries linger
	}
	if !cached(c, resource.ClusterURL, "left") {
		t.Fatal("left is not cached once its watch ended during the outage")
	}
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "kept", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	r.expect(client.Updated, "kept", "")
	r.expect(client.Removed, "kept", "")
	testutil.Eventually(t, "left to expire", func() bool { return !cached(c, resource.ClusterURL, "left") })
}
