package protocol

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// BenchmarkAck is what the receiving goroutine does with the ACK of a
// response, once gRPC has read it: the fast path's read of the wire bytes
// and the ACK's bookkeeping (recvLoop). A stream ACKs every response, so
// this is paid once per response sent.
func BenchmarkAck(b *testing.B) {
	for _, c := range []struct {
		name  string
		delta bool
	}{{"sotw/clusters=10", false}, {"delta/clusters=100", true}} {
		b.Run(c.name, func(b *testing.B) {
			r := 10
			if c.delta {
				r = 100
			}
			f := newFanRig(b, 1, r, c.delta, false)
			for range 20 { // a delta stream remembers its last 16 responses
				f.round(b)
			}
			st := f.streams[0]
			ts := st.types[resource.ClusterURL]
			var req []byte
			var err error
			if c.delta {
				req, err = proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: ts.nonce})
			} else {
				req, err = proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, VersionInfo: ts.sentVersion,
					ResponseNonce: ts.nonce, ResourceNames: f.names})
			}
			if err != nil {
				b.Fatal(err)
			}
			st.node = &corev3.Node{Id: "bench"}
			if !c.delta {
				a, _ := readPlainAck(req)
				ts.lastReq, ts.hasLastReq = a.digest, true // as the subscribing request left it
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var ok bool
				if c.delta {
					t, n, plain := readPlainDeltaAck(req)
					ok = plain && st.handlePlainDeltaAck(t, n)
				} else {
					a, plain := readPlainAck(req)
					ok = plain && st.handlePlainAck(a)
				}
				if !ok {
					b.Fatal("the ACK did not take the fast path")
				}
			}
			b.StopTimer()
			if st.due() {
				b.Fatal("the ACKs left work due")
			}
		})
	}
}
