package protocol

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// The fast path reads plain ACKs exactly as a full decode would, and
// leaves everything else to the full decode.
func TestPlainAckMatchesFullDecode(t *testing.T) {
	ack := &discoveryv3.DiscoveryRequest{TypeUrl: "t", VersionInfo: "7", ResponseNonce: "3", ResourceNames: []string{"a", "b", "xdstp://x/t/c?k=v"}}
	b, err := proto.Marshal(ack)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := readPlainAck(b)
	if !ok || string(a.typeURL) != "t" || string(a.version) != "7" || string(a.nonce) != "3" {
		t.Fatalf("read %+v %v", a, ok)
	}
	if a.digest != requestDigest(ack) {
		t.Fatal("digests differ between the fast path and the full decode")
	}
	other := proto.Clone(ack).(*discoveryv3.DiscoveryRequest)
	other.ResourceNames = []string{"a", "b"}
	if requestDigest(other) == a.digest {
		t.Fatal("different names, same digest")
	}
	for name, m := range map[string]*discoveryv3.DiscoveryRequest{
		"node":     {Node: &corev3.Node{Id: "n"}, ResourceNames: []string{"a"}},
		"nack":     {ErrorDetail: &status.Status{Message: "bad"}, ResourceNames: []string{"a"}},
		"locators": {ResourceLocators: []*discoveryv3.ResourceLocator{{Name: "a"}}},
	} {
		b, _ := proto.Marshal(m)
		if _, ok := readPlainAck(b); ok {
			t.Errorf("%s took the fast path", name)
		}
	}
}
