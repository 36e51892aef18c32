package client_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §2.7 from the client's side, against a real server, on
// both transports: a variant with a TTL arrives with it, heartbeats renew
// it while the server is there, and once it is gone the variant expires:
// removed from the cache and reported to watchers. Over SotW the TTL comes
// in a wrapped resource; a cluster's heartbeat (a full-state type) is the
// whole state again, an endpoint's a payload-less resource.
func TestTTLRenewedThenExpired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sotw    bool
		typeURL string
		doc     string
	}{
		{"delta cluster", false, resource.ClusterURL, "  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n"},
		{"sotw cluster", true, resource.ClusterURL, "  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: c\n"},
		{"sotw endpoints", true, resource.EndpointURL, "  \"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n  cluster_name: c\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testTTLRenewedThenExpired(t, tc.sotw, tc.typeURL, tc.doc)
		})
	}
}

func testTTLRenewedThenExpired(t *testing.T, sotw bool, typeURL, doc string) {
	o := testorigin.Start(t)
	o.Apply("ttl: 300ms\nresource:\n" + doc)
	c := newClient(t, bs{servers: []string{o.Addr}, sotw: sotw}.build(t), client.Options{})
	events := make(chan client.Event, 10)
	cancel, err := c.Watch(t.Context(), typeURL, "c", func(e client.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	e := <-events
	if e.Kind != client.Updated || e.Variant.TTL != 300*time.Millisecond {
		t.Fatalf("first event %v, TTL %v", e.Kind, e.Variant)
	}
	// Two heartbeats, acknowledged (so applied): the variant has outlived
	// its TTL, renewed. The stream carries one type only: its responses are
	// the first answer and the heartbeats, nonces 1, 2 and 3.
	testutil.Eventually(t, "two heartbeats acknowledged", func() bool {
		for _, cl := range o.Srv.Streams() {
			for _, ty := range cl.Types {
				if n, _ := strconv.Atoi(ty.AckedNonce); ty.URL == typeURL && n >= 3 {
					return true
				}
			}
		}
		return false
	})
	barrier(t, c, o)
	select {
	case e := <-events:
		t.Fatalf("while renewed: %v", e.Kind)
	default:
	}
	o.Stop()
	select {
	case e := <-events:
		if e.Kind != client.Removed {
			t.Fatalf("after the server went: %v, want Removed", e.Kind)
		}
	case <-time.After(wait):
		t.Fatal("the variant did not expire")
	}
	if cached(c, typeURL, "c") {
		t.Error("expired, still cached")
	}
}
