package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// A WatchCollection onErr may cancel its own collection: it is not called
// with the collection's lock held, so the delivery goroutine — and every
// other watcher of the client — carries on.
func TestCollectionOnErrMayCancelCollection(t *testing.T) {
	o := servertest.Start(t)
	coll := "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"
	o.Apply(listenerCollection(coll, "nowhere/x") + "---\n" + cluster("other", "o"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	ready := make(chan struct{})
	errs := make(chan error, 10)
	var cancel client.CancelFunc
	cancel, err := c.WatchCollection(context.Background(), resource.ListenerCollectionURL, coll, func([]client.CollectionMember) {}, func(err error) {
		<-ready
		errs <- err
		cancel()
	})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	select {
	case err := <-errs:
		t.Logf("onErr: %v", err)
	case <-time.After(wait):
		t.Fatal("onErr not called for a member in an unknown authority")
	}
	// Every other watch is still delivered.
	r := newRecorder(t)
	oc, err := c.Watch(t.Context(), resource.ClusterURL, "other", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer oc()
	r.expect(client.Updated, "other", "")
	select {
	case err := <-errs:
		t.Errorf("onErr called after its collection was cancelled: %v", err)
	default:
	}
}
