package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/protocol/protocoltest"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/servertest"
)

// eventually polls cond until it holds, failing after protocoltest.Wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(protocoltest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A parameter set's last downstream leaves while another parameter set of
// the same name is still followed: its variant must leave the cache with
// its upstream subscription, or a later downstream with those parameters
// is answered at once with a copy the relay stopped following (stale
// after an upstream change, or deleted upstream).
func TestVariantOfAnEndedParameterSetIsNotServedStale(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream sotw=", sotw), func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(routeVariant("env=prod", "prod1") + "---\n" + routeVariant("env=test", "test1"))
			rl := startRelay(t, o.Addr, sotw)
			test := protocoltest.NewDelta(t, rl.conn, nil)
			test.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
			test.Ack(test.Recv())
			prod := protocoltest.NewDelta(t, rl.conn, nil)
			prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			prod.Ack(prod.Recv())
			eventually(t, "two upstream subscriptions", func() bool { return o.Subscriptions("r") == 2 })
			prod.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			eventually(t, "the env=prod upstream subscription ended", func() bool { return o.Subscriptions("r") == 1 })
			o.Apply(routeVariant("env=prod", "prod2") + "---\n" + routeVariant("env=test", "test1"))
			again := protocoltest.NewDelta(t, rl.conn, nil)
			again.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "prod")}})
			r := again.Recv()
			if len(r.Resources) != 1 || !strings.Contains(r.Resources[0].Resource.String(), "prod2") {
				t.Fatalf("env=prod after it changed upstream: %s %v", protocoltest.Describe(r), r.Resources)
			}
		})
	}
}
