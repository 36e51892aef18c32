package relay_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// watchOnce is a short-lived client of the relay (a job, a CLI): it
// watches cluster c until it has it, returns its alt_stat_name, and leaves.
func watchOnce(t *testing.T, addr string) string {
	t.Helper()
	js, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{"server_uri": addr, "channel_creds": []any{map[string]any{"type": "insecure"}}}},
		"node":        map[string]any{"id": "job"},
	})
	b, err := client.ParseBootstrap(js)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(b, client.Options{DoesNotExistTimeout: -1, Logger: testorigin.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan string, 1)
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "c", func(e client.Event) {
		if e.Kind == client.Updated {
			tag := "?"
			for _, v := range []string{"v1", "v2"} {
				if bytes.Contains(e.Variant.Body(), []byte(v)) {
					tag = v
				}
			}
			select {
			case got <- tag:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	select {
	case tag := <-got:
		return tag
	case <-time.After(20 * time.Second):
		t.Fatal("no update from the relay")
		return ""
	}
}

// --cache-linger: after the last downstream of a resource leaves, the relay
// stays subscribed upstream and keeps the entry fresh, so a client that
// connects during an origin outage after the previous one left is still
// served — with what the origin last had, not what the first client saw.
// Without it (0), the entry goes with its last downstream.
func TestCacheLingerServesShortLivedClients(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "v1"))
	rl := startRelayLinger(t, o.Addr, false, time.Hour)
	if got := watchOnce(t, rl.addr); got != "v1" {
		t.Fatalf("first client: %q", got)
	}
	testutil.Eventually(t, "the entry to linger", func() bool { return relayMetric(t, rl, "xdsd_relay_lingering_subscriptions") == 1 })
	if n := o.Subscriptions("c"); n != 1 {
		t.Fatalf("upstream subscriptions once the client left: %d, want 1 (lingering)", n)
	}
	// Kept fresh: a change at the origin reaches the cache with nobody
	// downstream.
	o.Apply(clusterDoc("c", "v2"))
	testutil.Eventually(t, "the relay's cache to hold v2", func() bool {
		_, vs, _ := rl.r.Resources(t.Context())
		for _, v := range vs {
			if v.Type.URL == resource.ClusterURL && v.Name == "c" && bytes.Contains(v.Body(), []byte("v2")) {
				return true
			}
		}
		return false
	})
	o.Stop()
	rl.awaitOutage(t)
	if got := watchOnce(t, rl.addr); got != "v2" {
		t.Fatalf("client during the outage: %q, want v2", got)
	}
	if n := relayMetric(t, rl, "xdsd_relay_lingering_revived_total"); n != 1 {
		t.Errorf("revived: %v, want 1", n)
	}
	testutil.Eventually(t, "the entry to linger again once the second client left", func() bool {
		return relayMetric(t, rl, "xdsd_relay_lingering_subscriptions") == 1
	})
}

// Without --cache-linger the upstream subscription ends with the last
// downstream.
func TestNoCacheLinger(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "v1"))
	rl := startRelayLinger(t, o.Addr, true, 0)
	if got := watchOnce(t, rl.addr); got != "v1" {
		t.Fatalf("first client: %q", got)
	}
	testutil.Eventually(t, "the upstream subscription to end", func() bool { return o.Subscriptions("c") == 0 })
}

// relayMetric is the value of a relay's gauge or counter (summed over labels).
func relayMetric(t *testing.T, rl *relayUnderTest, name string) float64 {
	t.Helper()
	mfs, err := rl.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
