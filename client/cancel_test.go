package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// spin busy-waits for d: it shifts a cancel against a delivery that is
// under way, which a sleep would be too coarse for.
func spin(d time.Duration) {
	for s := time.Now(); time.Since(s) < d; {
	}
}

// Cancelling a collection watch while its first delivery is adding the
// members' watches neither crashes nor leaves a member watched.
func TestWatchCollectionCancelRacesDelivery(t *testing.T) {
	o := testorigin.Start(t)
	coll := "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"
	o.Apply(listenerCollection(coll, "a/ref", "a/ref2", "a/ref3") + "---\n" + listener("ref", "referenced"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	// Keep the collection cached, so each new watch is delivered at once.
	keep := newRecorder(t)
	kc, err := c.Watch(t.Context(), resource.ListenerCollectionURL, coll, keep.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer kc()
	keep.expect(client.Updated, "", "")
	for i := range 3000 {
		cancel, err := c.WatchCollection(t.Context(), resource.ListenerCollectionURL, coll, func([]client.CollectionMember) {}, nil)
		if err != nil {
			t.Fatal(err)
		}
		spin(time.Duration(i%50) * time.Microsecond)
		cancel()
	}
	barrier(t, c, o)
	for _, id := range []string{"ref", "ref2", "ref3"} {
		if n := o.Subscriptions(lis + id); n != 0 {
			t.Errorf("%s: %d upstream subscriptions after every collection watch was cancelled", id, n)
		}
	}
}

// Once the channel cancel returns is closed, the handler is not called
// again, however the cancel falls against a delivery under way.
func TestCancelChannelClosesAfterLastCall(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	// Keep a cached, so each new watch is delivered at once.
	keep := newRecorder(t)
	kc, err := c.Watch(t.Context(), resource.ClusterURL, "a", keep.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer kc()
	keep.expect(client.Updated, "a", "")
	late := 0
	for i := range 3000 {
		var returned atomic.Bool
		cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {
			spin(5 * time.Microsecond)
			if returned.Load() {
				late++ // on the delivery goroutine only
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		spin(time.Duration(i%50) * time.Microsecond)
		<-cancel()
		returned.Store(true)
	}
	barrier(t, c, o) // every delivery scheduled so far is done
	c.Close()
	if late > 0 {
		t.Errorf("a handler ran after its cancel's channel was closed, %d times", late)
	}
}

// cancel called while the handler runs returns at once; the channel it
// returns is closed when the handler has returned.
func TestCancelDoesNotWaitForHandler(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(e client.Event) {
		if e.Kind == client.Updated {
			close(entered)
			<-release
			finished.Store(true)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(wait):
		t.Fatal("handler not called")
	}
	returned := make(chan (<-chan struct{}), 1)
	go func() { returned <- cancel() }()
	var done <-chan struct{}
	select {
	case done = <-returned:
	case <-time.After(wait):
		close(release)
		t.Fatal("cancel waited for the handler")
	}
	select {
	case <-done:
		t.Error("cancel's channel closed while the handler was still running")
	default:
	}
	close(release)
	select {
	case <-done:
		if !finished.Load() {
			t.Error("cancel's channel closed before the handler returned")
		}
	case <-time.After(wait):
		t.Fatal("cancel's channel never closed")
	}
	if again := cancel(); again != done {
		t.Error("a second cancel returned another channel")
	}
}

// A handler may cancel its own watch, and another one, without deadlock;
// neither is called again.
func TestCancelFromHandler(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "one") + "---\n" + cluster("b", "one"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	rb := newRecorder(t)
	cancelB, err := c.Watch(t.Context(), resource.ClusterURL, "b", rb.handle)
	if err != nil {
		t.Fatal(err)
	}
	rb.expect(client.Updated, "b", "one")
	var cancelA client.CancelFunc
	ready := make(chan struct{})
	calls := make(chan client.Event, 10)
	cancelA, err = c.Watch(t.Context(), resource.ClusterURL, "a", func(e client.Event) {
		<-ready
		calls <- e
		cancelA()
		cancelB()
	})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	select {
	case <-calls:
	case <-time.After(wait):
		t.Fatal("handler not called")
	}
	o.Apply(cluster("a", "two") + "---\n" + cluster("b", "two"))
	settled := barrier(t, c, o)
	select {
	case e := <-calls:
		t.Errorf("handler called after it cancelled its watch: %s", describe(e))
	default:
	}
	rb.none(settled)
}

// The same for collections: once cancel's channel is closed, the handler
// is not called.
func TestWatchCollectionCancelChannelClosesAfterLastCall(t *testing.T) {
	o := testorigin.Start(t)
	coll := "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"
	o.Apply(listenerCollection(coll, "a/ref") + "---\n" + listener("ref", "referenced"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	keep := newRecorder(t)
	kc, err := c.Watch(t.Context(), resource.ListenerCollectionURL, coll, keep.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer kc()
	keep.expect(client.Updated, "", "")
	late := 0
	for i := range 2000 {
		var returned atomic.Bool
		cancel, err := c.WatchCollection(t.Context(), resource.ListenerCollectionURL, coll, func([]client.CollectionMember) {
			spin(5 * time.Microsecond)
			if returned.Load() {
				late++
			}
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		spin(time.Duration(i%50) * time.Microsecond)
		<-cancel()
		returned.Store(true)
	}
	barrier(t, c, o)
	c.Close()
	if late > 0 {
		t.Errorf("a collection handler ran after its cancel's channel was closed, %d times", late)
	}
}

// The end of the context given to Watch (or WatchCollection, or a typed
// helper) cancels the watch; a context already ended is an error.
func TestWatchEndsWithContext(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "one"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	r := newRecorder(t)
	if _, err := c.Watch(ctx, resource.ClusterURL, "a", r.handle); err != nil {
		t.Fatal(err)
	}
	typed := make(chan client.TypedEvent[*clusterv3.Cluster], 10)
	if _, err := c.WatchCluster(ctx, "a", func(e client.TypedEvent[*clusterv3.Cluster]) { typed <- e }); err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, "a", "one")
	select {
	case <-typed:
	case <-time.After(wait):
		t.Fatal("no typed event")
	}
	cancel()
	// Unsubscribed upstream once the context's cancel has run.
	for deadline := time.Now().Add(wait); o.Subscriptions("a") != 0; {
		if time.Now().After(deadline) {
			t.Fatal("still subscribed after the context ended")
		}
		barrier(t, c, o)
	}
	o.Apply(cluster("a", "two"))
	r.none(barrier(t, c, o))
	if len(typed) > 0 {
		t.Errorf("typed watch called after its context ended")
	}
	if _, err := c.Watch(ctx, resource.ClusterURL, "a", r.handle); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch with an ended context: %v", err)
	}
}
