package clientcore

import (
	"testing"
	"time"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// Close leaves no timer behind: the #alt= rechecks pending are stopped,
// and a stream coming up or going down as Close runs starts neither a
// does-not-exist timer nor a recheck.
func TestCloseLeavesNoTimers(t *testing.T) {
	b, err := clientdata.ParseBootstrap([]byte(`{"xds_servers":[{"server_uri":"127.0.0.1:1","channel_creds":[{"type":"insecure"}]}],"authorities":{"p":{},"q":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(b, clientdata.Options{Logger: testorigin.Quiet, AltTimeout: time.Hour}, cachepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	primary := "xdstp://p/envoy.config.cluster.v3.Cluster/x"
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt=xdstp://q/envoy.config.cluster.v3.Cluster/x", func(clientdata.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	var ch *channel
	c.state.Do(func() { ch, err = c.route(primary) })
	if err != nil {
		t.Fatal(err)
	}
	c.handlers.Do(func() {
		if len(c.altTimers) != 1 {
			t.Errorf("%d #alt= rechecks pending, want 1", len(c.altTimers))
		}
	})
	c.Close()
	// Both goroutines have ended: what is left is the test's to read. What
	// a session ending or starting as Close runs would do:
	c.channelState(ch, false)
	c.channelState(ch, true)
	if len(c.altTimers) != 0 {
		t.Errorf("%d #alt= rechecks pending after Close", len(c.altTimers))
	}
	st := c.status[db.Key{Type: resource.ClusterURL, Name: primary}]
	if st == nil {
		t.Fatal("no status")
	}
	if st.timer != nil {
		t.Error("a does-not-exist timer started after Close")
	}
}
