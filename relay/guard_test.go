package relay_test

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/policy"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// Issue 27 point 5 through a relay: a glob whose members the origin's
// policy all denies reaches a relay's downstream exactly as an empty glob
// does, over a delta and over a SotW upstream. (Each glob is the first
// subscription of a relay of its own: over SotW, an empty full state
// cannot say which of two requests it answers, so a glob added later to a
// SotW upstream stream waits, empty or denied alike.)
func TestDeniedGlobThroughARelayIsEmpty(t *testing.T) {
	const (
		cds    = "xdstp://a/envoy.config.cluster.v3.Cluster/"
		secret = cds + "secret/*"
		empty  = cds + "none/*"
	)
	p, err := policy.Parse([]byte("rules:\n- types: [cds]\n  names: [\""+cds+"open/*\"]\n"), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o := testorigin.New(t, "127.0.0.1:0")
	o.Guard = p
	o.Start()
	o.Apply(clusterDoc(cds+"secret/a", "a") + "---\n" + clusterDoc(cds+"secret/b", "b") + "---\n" + clusterDoc(cds+"open/c", "c"))
	for _, sotw := range []bool{false, true} {
		answer := func(glob string) string {
			rl := startRelay(t, o.Addr, sotw)
			d := protocoltest.NewDelta(t, rl.conn, nil)
			d.Sub(resource.ClusterURL, glob)
			r := d.Recv()
			d.Ack(r)
			return strings.ReplaceAll(protocoltest.Describe(r), glob, "GLOB")
		}
		got, want := answer(secret), answer(empty)
		if got != want || want != "cluster.v3.Cluster: -GLOB" {
			t.Fatalf("sotw upstream %v: denied glob answered %q, an empty one %q", sotw, got, want)
		}
		// The glob the policy allows still has its member.
		rl := startRelay(t, o.Addr, sotw)
		open := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
		open.d.Sub(resource.ClusterURL, cds+"open/*")
		open.until(map[string]string{cds + "open/c": "c"})
	}
}
