package relay_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/h2attack"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/relay"
	"github.com/xdsd/xdsd/resource"
)

// The limits of one downstream connection are the Options': a gRPC server
// made with the relay's TransportCredentials closes a connection whose
// requests not yet complete pass MaxConnectionRequestBytes (four streams
// each sending 2 MiB of a 3 MiB message, against 4 MiB), and counts it,
// while a client on another connection is served from the upstream;
// MaxConnectionSubscriptionBytes ends a stream that would pass it.
func TestConnectionLimitsOptions(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(clusterDoc("c", "1"))
	js, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{"server_uri": o.Addr, "channel_creds": []any{map[string]any{"type": "insecure"}}}},
		"node":        map[string]any{"id": "relay"},
	})
	b, err := client.ParseBootstrap(js)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := relay.New(b, relay.Options{Logger: testorigin.Quiet, Registerer: reg,
		MaxConnectionRequestBytes: 4 << 20, MaxConnectionSubscriptionBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	addr, conn := protocoltest.ServeWith(t, r.Register, grpc.Creds(r.TransportCredentials(nil)))
	rl := &relayUnderTest{r: r, reg: reg}

	a, c := h2attack.Run(t, addr, 4, 3<<20, 2<<20)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatalf("the connection over MaxConnectionRequestBytes was kept: %+v", a.State())
	}
	if got := promCount(t, rl, "xdsd_connection_request_bytes_refused_total"); got != 1 {
		t.Errorf("xdsd_connection_request_bytes_refused_total %v, want 1", got)
	}

	d := protocoltest.NewDelta(t, conn, protocoltest.Node("normal", nil))
	d.Sub(resource.ClusterURL, "c")
	if got := protocoltest.Describe(d.Recv()); got != "cluster.v3.Cluster: c" {
		t.Fatalf("served %s", got)
	}
	big := protocoltest.NewDelta(t, conn, protocoltest.Node("big", nil))
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprint("name-", i)
	}
	big.Sub(resource.ClusterURL, names...)
	select {
	case err := <-big.Errs:
		if err == nil || !strings.Contains(err.Error(), "--max-connection-subscription-bytes") {
			t.Fatalf("1,000 names over MaxConnectionSubscriptionBytes: %v, want RESOURCE_EXHAUSTED naming the limit", err)
		}
	case r := <-big.Resps:
		t.Fatalf("1,000 names over MaxConnectionSubscriptionBytes answered: %s", protocoltest.Describe(r))
	case <-time.After(30 * time.Second):
		t.Fatal("1,000 names over MaxConnectionSubscriptionBytes: the stream was not ended")
	}
	if got := promCount(t, rl, "xdsd_subscription_bytes_refused_total"); got != 1 {
		t.Errorf("xdsd_subscription_bytes_refused_total %v, want 1", got)
	}
}

func promCount(t *testing.T, rl *relayUnderTest, name string) float64 {
	t.Helper()
	return promtest.ToFloat64(relayCounter(t, rl, name))
}
