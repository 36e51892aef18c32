package protocol_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/resource"
)

// A stream is served — first response, a change, and ended when the server
// closes, so the client reconnects at once — on a gRPC server made
// with ServerOptions (one goroutine per idle stream, whose read Close must
// end) and on one made with ServerCodec alone (a reading goroutine beside
// the handler).
func TestCloseEndsStreams(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []grpc.ServerOption
		want codes.Code
	}{
		// gRPC writes CANCELLED itself when the read Close ends fails.
		{"ServerOptions", protocol.ServerOptions(), codes.Canceled},
		{"ServerCodec", []grpc.ServerOption{protocol.ServerCodec()}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := db.New(db.Hooks{})
			ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			g := grpc.NewServer(tc.opts...)
			ps.Register(g)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go g.Serve(lis)
			defer g.Stop()
			cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			h := &harness{t: t, db: d, srv: ps}
			h.put(cluster("a"))
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			req := &discoveryv3.DiscoveryRequest{Node: node("n", nil), TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}}
			if err := st.Send(req); err != nil {
				t.Fatal(err)
			}
			r, err := st.Recv()
			if err != nil || len(r.Resources) != 1 {
				t.Fatalf("first response: %v %v", r, err)
			}
			st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
			h.put(clusterTagged("a", "changed"))
			r2, err := st.Recv()
			if err != nil || r2.VersionInfo == r.VersionInfo {
				t.Fatalf("after a change: %v %v", r2, err)
			}
			ps.Close()
			// The stream ends at once, with the code gRPC writes for how it
			// ended; under load gRPC may instead report the transport
			// going away (Unavailable, "server shutting down"). Either way
			// the client reconnects at once: what must not happen is the
			// stream outliving Close until the test's deadline.
			if _, err := st.Recv(); status.Code(err) != tc.want && status.Code(err) != codes.Unavailable {
				t.Fatalf("after Close: %v, want %v (or Unavailable)", err, tc.want)
			}
		})
	}
}
