package protocol_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// TestSlowStreamsHoldUpNoOne: clients that stop reading, more of them
// than the send pool keeps goroutines (tuning.SendWorkers), leave their
// sends waiting on flow control for good; a client that reads still gets
// every change. Each slow client's window (64 KiB, fixed: no BDP growth)
// is far below one response (200 KiB), so from the second change on each
// of them holds a goroutine in SendMsg.
func TestSlowStreamsHoldUpNoOne(t *testing.T) {
	d := db.New(db.Hooks{})
	ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	addr, conn := protocoltest.Serve(t, ps.Register)
	h := &harness{t: t, db: d, srv: ps, conn: conn}
	big := func(i int) *resource.Variant {
		return clusterTagged("big", fmt.Sprintf("%d-%s", i, strings.Repeat("x", 200<<10)))
	}
	h.put(big(0))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := 2*runtime.GOMAXPROCS(0) + 2
	for i := range slow {
		// A connection each: a stream that does not read holds its
		// connection's window too.
		sc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(sc).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = st.Send(&discoveryv3.DiscoveryRequest{Node: node(fmt.Sprintf("slow-%d", i), nil),
			TypeUrl: resource.ClusterURL, ResourceNames: []string{"big"}})
		if err != nil {
			t.Fatal(err)
		}
		// Never read.
	}

	c := h.sotw(node("reader", nil))
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"big"}})
	r := c.Recv()
	c.Ack(r, "big")
	for i := 1; i <= 4; i++ {
		h.put(big(i))
		// The reader's response may follow the slow streams' in the
		// pool's queue; it comes all the same (Recv's deadline: 10 s).
		r = c.Recv()
		got := sotwNames(t, r)
		if len(got) != 1 || got[0] != "big" {
			t.Fatalf("change %d: response holds %q", i, got)
		}
		if !strings.Contains(string(r.Resources[0].GetValue()), fmt.Sprintf("%d-x", i)) {
			t.Fatalf("change %d: the reader got an older state", i)
		}
		c.Ack(r, "big")
	}
}
