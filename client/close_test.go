package client_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// Close called from a handler returns (it does not wait for the handler
// goroutine, which is its caller), and no handler runs after it. A Close
// from elsewhere meanwhile returns too, without waiting for that handler;
// the watch's cancel channel closes once the handler has returned.
func TestCloseFromHandlerReturns(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "x") + "---\n" + cluster("b", "y"))
	c, err := client.New(bs{servers: []string{o.Addr}}.build(t), client.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	release := make(chan struct{})
	after := make(chan client.Event, 10)
	var closing, returned atomic.Bool
	h := func(e client.Event) {
		if closing.Swap(true) {
			after <- e
			return
		}
		c.Close()
		close(closed)
		<-release
		returned.Store(true)
	}
	cancelA, err := c.Watch(t.Context(), resource.ClusterURL, "a", h)
	if err != nil {
		t.Fatal(err)
	}
	cancelB, err := c.Watch(t.Context(), resource.ClusterURL, "b", h)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close from a handler did not return")
	}
	second := make(chan struct{})
	go func() {
		c.Close()
		close(second)
	}()
	select {
	case <-second:
	case <-time.After(wait):
		close(release)
		t.Fatal("a second Close waited for the handler")
	}
	doneA, doneB := cancelA(), cancelB()
	close(release)
	for _, done := range []<-chan struct{}{doneA, doneB} {
		select {
		case <-done:
		case <-time.After(wait):
			t.Fatal("a cancel channel did not close once the handler returned")
		}
	}
	if !returned.Load() {
		t.Error("a cancel channel closed before the handler returned")
	}
	select {
	case e := <-after:
		t.Errorf("handler called after Close: %s", describe(e))
	default:
	}
}

// A wildcard watcher told of several members at once, whose handler closes
// the client at the first: once that handler returns, it is not called
// again for the others.
func TestCloseFromMemberHandlerStopsDelivery(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cluster("a", "x") + "---\n" + cluster("b", "y") + "---\n" + cluster("c", "z"))
	c, err := client.New(bs{servers: []string{o.Addr}}.build(t), client.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	closed := make(chan struct{})
	h := func(e client.Event) {
		if calls.Add(1) == 1 {
			c.Close()
			close(closed)
		}
	}
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "*", h); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("no event")
	}
	c.Close() // from elsewhere: waits for the delivery goroutine to end
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times; want 1 (none after the Close it called)", n)
	}
}
