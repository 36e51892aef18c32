package relay_test

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// A relay is one xdsd stream upstream carrying the parameter sets of the
// clients behind it: the origin counts it in a group per parameter set,
// agent xdsd; the relay's own groups show the clients behind it.
func TestFleetGroupsThroughARelay(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
	rl := startRelay(t, o.Addr, false)
	p := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	subParams(p.d, resource.RouteURL, "r", "env", "prod")
	p.until(map[string]string{"r": "prod1"})
	q := newView(t, protocoltest.NewDelta(t, rl.conn, nil))
	subParams(q.d, resource.RouteURL, "r", "env", "test")
	q.until(map[string]string{"r": "test1"})

	groups := func(gs []fleet.Group) string {
		var out string
		for _, g := range gs {
			out += fmt.Sprintf("%s %v %d; ", g.Agent, g.Params, g.Count)
		}
		return out
	}
	want := "xdsd map[env:prod] 1; xdsd map[env:test] 1; "
	testutil.Eventually(t, "the origin's groups: the relay under each parameter set", func() bool {
		return groups(o.Srv.Protocol().Groups()) == want
	})
	if got, want := groups(rl.r.Groups()), "grpc-go map[env:prod] 1; grpc-go map[env:test] 1; "; got != want {
		t.Errorf("the relay's groups: %s, want %s", got, want)
	}
}
