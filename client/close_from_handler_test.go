package client_test

import (
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// Close called from a handler returns (it does not wait for the delivery
// goroutine, which is its caller), and no handler runs after it; a Close
// from elsewhere meanwhile waits for the handler to end.
func TestCloseFromHandlerReturns(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(cluster("a", "x") + "---\n" + cluster("b", "y"))
	c, err := client.New(bs{servers: []string{o.Addr}}.build(t), client.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	release := make(chan struct{})
	after := make(chan client.Event, 10)
	var closing bool
	h := func(e client.Event) {
		if closing {
			after <- e
			return
		}
		closing = true
		c.Close()
		close(closed)
		<-release
	}
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "a", h); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "b", h); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close from a handler did not return")
	}
	// Another Close waits for the handler that closed the client.
	second := make(chan struct{})
	go func() {
		c.Close()
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("a second Close returned while a handler was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-second:
	case <-time.After(wait):
		t.Fatal("a second Close did not return once the handler ended")
	}
	select {
	case e := <-after:
		t.Errorf("handler called after Close: %s", describe(e))
	default:
	}
}
