package clientcore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// The last watcher of a name cancelling while a new one starts watching it
// leaves the name subscribed upstream: the db's interest hooks reach the
// client in the order of the changes (off, then on), never on then off.
func TestWatchRacingLastCancelStaysSubscribed(t *testing.T) {
	c := startClient(t, `{"xds_servers":[{"server_uri":"127.0.0.1:1","channel_creds":[{"type":"insecure"}]}]}`, clientdata.Options{})
	nop := func(clientdata.Event) {}
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

// Watches ending as their upstream goes down: whatever the interleaving,
// every entry the cache keeps is one the channel holds (so a removal by
// the server reaches it, and its TTL runs), and lingers in the client too
// (so it is evicted once the upstream is healthy).
func TestLingerDecisionMatchesChannel(t *testing.T) {
	o := testorigin.Start(t)
	const n = 40
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c%d\n", i))
	}
	o.Apply(strings.Join(docs, "---\n"))
	c := newVHDSClient(t, o.Addr)
	for round := range 5 {
		if round > 0 {
			o.Start()
		}
		lingerRound(t, c, o, n)
	}
}

func lingerRound(t *testing.T, c *Client, o *testorigin.Origin, n int) {
	t.Helper()
	var cancels []CancelFunc
	got := make(chan string, n)
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		var once sync.Once
		cancel, err := c.Watch(context.Background(), resource.ClusterURL, name, func(e clientdata.Event) {
			if e.Kind == clientdata.Updated {
				once.Do(func() { got <- name })
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	for range n {
		<-got
	}
	var ch *channel
	c.state.Do(func() { ch, _ = c.route("c0") })
	testutil.Eventually(t, "a healthy stream", func() (up bool) {
		c.state.Do(func() { up = ch.up() })
		return up
	})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		o.Stop()
	}()
	var done []<-chan struct{}
	for _, cancel := range cancels {
		done = append(done, cancel())
	}
	for _, d := range done {
		<-d
	}
	wg.Wait()
	var bad []string
	c.state.Do(func() {
		var cached []string
		c.db.Read(func(r *db.Reader) { cached = r.Names(resource.ClusterURL) })
		t0 := ch.types[resource.ClusterURL]
		for _, name := range cached {
			_, lingers := c.lingering[db.Key{Type: resource.ClusterURL, Name: name}]
			if t0.held[name] == nil || !lingers {
				bad = append(bad, fmt.Sprintf("%s (held %v, lingering %v)", name, t0.held[name] != nil, lingers))
			}
		}
	})
	if len(bad) > 0 {
		t.Errorf("cached, but not both held and lingering: %v", bad)
	}
}
