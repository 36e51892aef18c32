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

// Only a request with nothing but a type URL and a nonce takes the delta
// fast path; anything else — a node, a subscription change, a NACK — is
// decoded in full.
func TestPlainDeltaAck(t *testing.T) {
	enc := func(r *discoveryv3.DeltaDiscoveryRequest) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const typ = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	tu, n, ok := readPlainDeltaAck(enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: "7"}))
	if !ok || string(tu) != typ || string(n) != "7" {
		t.Errorf("plain ACK: %q %q %v", tu, n, ok)
	}
	for name, r := range map[string]*discoveryv3.DeltaDiscoveryRequest{
		"no nonce":     {TypeUrl: typ},
		"node":         {TypeUrl: typ, ResponseNonce: "7", Node: &corev3.Node{Id: "n"}},
		"subscribe":    {TypeUrl: typ, ResponseNonce: "7", ResourceNamesSubscribe: []string{"a"}},
		"unsubscribe":  {TypeUrl: typ, ResponseNonce: "7", ResourceNamesUnsubscribe: []string{"a"}},
		"NACK":         {TypeUrl: typ, ResponseNonce: "7", ErrorDetail: &status.Status{Code: 13, Message: "bad"}},
		"initial":      {TypeUrl: typ, ResponseNonce: "7", InitialResourceVersions: map[string]string{"a": "1"}},
		"locators":     {TypeUrl: typ, ResponseNonce: "7", ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{{Name: "a"}}},
		"unsub by loc": {TypeUrl: typ, ResponseNonce: "7", ResourceLocatorsUnsubscribe: []*discoveryv3.ResourceLocator{{Name: "a"}}},
	} {
		if _, _, ok := readPlainDeltaAck(enc(r)); ok {
			t.Errorf("%s: took the fast path", name)
		}
	}
}
