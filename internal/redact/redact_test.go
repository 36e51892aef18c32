package redact_test

import (
	"crypto/sha256"
	"encoding/hex"
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
	if strings.Contains(js, "PRIVATE KEY") || !strings.Contains(js, "redacted hmac:") {
		t.Errorf("redacted cluster:\n%s", js)
	}
}

func TestNothingSecret(t *testing.T) {
	c := &clusterv3.Cluster{Name: "plain"}
	if got := redact.Message(c); got != proto.Message(c) {
		t.Error("a message with nothing secret was copied")
	}
}

// Issue 27 point 8, the attack: a digest was a bare SHA-256 prefix, so
// anyone who read one could test guessed passwords offline. It is now an
// HMAC under a secret key: the guess's hash does not match, the same key
// gives the same digest (replicas, restarts), and another key another.
func TestDigestIsKeyed(t *testing.T) {
	const password = "hunter2"
	sum := sha256.Sum256([]byte(password))
	guess := hex.EncodeToString(sum[:12])
	redact.SetKey([]byte("key one"))
	d1 := redact.Digest([]byte(password))
	if strings.Contains(d1, guess) || !strings.HasPrefix(d1, "[redacted hmac:") {
		t.Fatalf("digest %s is the bare hash of the secret", d1)
	}
	redact.SetKey([]byte("key two"))
	if d2 := redact.Digest([]byte(password)); d2 == d1 {
		t.Fatal("two keys give one digest")
	}
	redact.SetKey([]byte("key one"))
	if again := redact.Digest([]byte(password)); again != d1 {
		t.Fatalf("the same key gives %s, then %s", d1, again)
	}
	redact.SetKey(nil) // ignored
	if again := redact.Digest([]byte(password)); again != d1 {
		t.Fatal("an empty key was taken")
	}
}
