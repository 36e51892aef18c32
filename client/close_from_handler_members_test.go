package client_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// A wildcard watcher told of several members at once, whose handler closes
// the client at the first: once that handler returns, it is not called
// again for the others.
func TestCloseFromMemberHandlerStopsDelivery(t *testing.T) {
	o := servertest.Start(t)
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
