package client_test

import (
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// The last watcher of a resource cancelling and a new one watching it at
// once, before the stream sends anything: the cache let go of its copy, so
// the server must send it again — over SotW the request would otherwise
// name what the last one did, and the new watcher be told DoesNotExist
// (docs/protocol.md §1.6); over delta the subscription is sent again (§2.2).
func TestWatchAgainRightAfterTheLastCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(cluster("a", "x"))
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: tr.sotw}.build(t), client.Options{DoesNotExistTimeout: 2 * time.Second})
			r := newRecorder(t)
			cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
			if err != nil {
				t.Fatal(err)
			}
			r.expect(client.Updated, "a", "")
			for i := range 20 {
				cancel()
				r = newRecorder(t)
				if cancel, err = c.Watch(t.Context(), resource.ClusterURL, "a", r.handle); err != nil {
					t.Fatal(err)
				}
				if e := r.next(); e.Kind != client.Updated {
					t.Fatalf("round %d: %s", i, describe(e))
				}
			}
			cancel()
		})
	}
}
