package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// The last watcher of a name cancelling while a new one starts watching it
// leaves the name subscribed upstream: the db's interest hooks reach the
// client in the order of the changes (off, then on), never on then off.
func TestWatchRacingLastCancelStaysSubscribed(t *testing.T) {
	c := startClient(t, `{"xds_servers":[{"server_uri":"127.0.0.1:1","channel_creds":[{"type":"insecure"}]}]}`, Options{})
	nop := func(Event) {}
	const rounds = 3000
	lost := 0
	for i := range rounds {
		n := fmt.Sprintf("c%d", i)
		c1, err := c.Watch(context.Background(), resource.ClusterURL, n, nop)
		if err != nil {
			t.Fatal(err)
		}
		var c2 CancelFunc
		var wg sync.WaitGroup
		wg.Add(2)
		start := make(chan struct{})
		go func() {
			defer wg.Done()
			<-start
			spinFor(time.Duration(i%7) * time.Microsecond)
			<-c1() // its subscription has ended once the channel is closed
		}()
		go func() {
			defer wg.Done()
			<-start
			spinFor(time.Duration(i%13) * time.Microsecond)
			c2, _ = c.Watch(context.Background(), resource.ClusterURL, n, nop)
		}()
		close(start)
		wg.Wait()
		var ok bool
		var st resStatus
		c.state.Do(func() {
			ch, _ := c.route(n)
			_, ok = ch.types[resource.ClusterURL].subs[db.Key{Type: resource.ClusterURL, Name: n}]
			if s := c.status[db.Key{Type: resource.ClusterURL, Name: n}]; s != nil {
				st = *s
			}
		})
		if !ok {
			if lost++; lost == 1 {
				t.Logf("round %d: watched, but not subscribed upstream; status %+v", i, st)
			}
		}
		if c2 != nil {
			c2()
		}
	}
	if lost > 0 {
		t.Errorf("%d/%d rounds left a watched name unsubscribed upstream", lost, rounds)
	}
}

// spinFor busy-waits for d, to shift one goroutine against another more
// finely than a sleep can.
func spinFor(d time.Duration) {
	for s := time.Now(); time.Since(s) < d; {
	}
}
