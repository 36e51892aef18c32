package server_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/testutil/h2attack"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// counterValue sums the counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// The limits of one connection are the Options': Serve closes a
// connection whose requests not yet complete pass
// MaxConnectionRequestBytes (four streams each sending 2 MiB of a 3 MiB
// message, against 4 MiB), and counts it, while a client on another
// connection is served; MaxSubscriptionBytes ends a stream that
// subscribes more.
func TestConnectionLimitsOptions(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv, err := server.New(context.Background(), server.Options{Logger: quiet, Registerer: reg,
		MaxConnectionRequestBytes: 4 << 20, MaxSubscriptionBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	addr := lis.Addr().String()

	a, c := h2attack.Run(t, addr, 4, 3<<20, 2<<20)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatalf("the connection over MaxConnectionRequestBytes was kept: %+v", a.State())
	} else {
		t.Logf("closed: %s; %+v", how, a.State())
	}
	if got := counterValue(t, reg, "xdsd_connection_request_bytes_refused_total"); got != 1 {
		t.Errorf("xdsd_connection_request_bytes_refused_total %v, want 1", got)
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := protocoltest.NewDelta(t, conn, protocoltest.Node("normal", nil))
	d.Sub(resource.ClusterURL, "a")
	if r := d.Recv(); r.TypeUrl != resource.ClusterURL {
		t.Fatalf("answered %s", protocoltest.Describe(r))
	}
	big := protocoltest.NewDelta(t, conn, protocoltest.Node("big", nil))
	names := make([]string, 2000)
	for i := range names {
		names[i] = fmt.Sprint("name-", i)
	}
	big.Sub(resource.ClusterURL, names...)
	select {
	case err := <-big.Errs:
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("2,000 names over MaxSubscriptionBytes: %v, want RESOURCE_EXHAUSTED", err)
		}
	case r := <-big.Resps:
		t.Fatalf("2,000 names over MaxSubscriptionBytes answered: %s", protocoltest.Describe(r))
	case <-time.After(30 * time.Second):
		t.Fatal("2,000 names over MaxSubscriptionBytes: the stream was not ended")
	}
	if got := counterValue(t, reg, "xdsd_subscription_bytes_refused_total"); got != 1 {
		t.Errorf("xdsd_subscription_bytes_refused_total %v, want 1", got)
	}
}
