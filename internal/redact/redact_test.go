package redact_test

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/internal/redact"
)

const key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"

func inline(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func TestSecret(t *testing.T) {
	s := &tlsv3.Secret{Name: "server_cert", Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: inline("-----BEGIN CERTIFICATE-----\npublic\n-----END CERTIFICATE-----\n"),
		PrivateKey:       inline(key),
	}}}
	before := proto.Clone(s)
	got := redact.Message(s)
	js := protojson.Format(got)
	if strings.Contains(js, "PRIVATE KEY") || !strings.Contains(js, redact.Digest([]byte(key))) {
		t.Errorf("redacted secret:\n%s", js)
	}
	if !strings.Contains(js, "BEGIN CERTIFICATE") {
		t.Errorf("the certificate (not sensitive) is gone:\n%s", js)
	}
	if !proto.Equal(s, before) {
		t.Error("Message changed its argument")
	}
	// The same secret gives the same digest; another, another.
	other := redact.Message(&tlsv3.Secret{Type: &tlsv3.Secret_GenericSecret{GenericSecret: &tlsv3.GenericSecret{Secret: inline("hmac-key")}}})
	if js := protojson.Format(other); strings.Contains(js, "hmac-key") || !strings.Contains(js, redact.Digest([]byte("hmac-key"))) {
		t.Errorf("generic secret:\n%s", js)
	}
}

// A secret inline in a cluster's transport socket (an Any) is found too.
func TestSecretInAny(t *testing.T) {
	ctx, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{PrivateKey: inline(key)}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterv3.Cluster{Name: "c", TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}}
	js := protojson.Format(redact.Message(c))
	if strings.Contains(js, "PRIVATE KEY") || !strings.Contains(js, "redacted sha256:") {
		t.Errorf("redacted cluster:\n%s", js)
	}
}

func TestNothingSecret(t *testing.T) {
	c := &clusterv3.Cluster{Name: "plain"}
	if got := redact.Message(c); got != proto.Message(c) {
		t.Error("a message with nothing secret was copied")
	}
}
