package mtls_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveTLS accepts connections on 127.0.0.1 with cfg, completing each
// handshake; it returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { lis.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Write([]byte("x")) // fails for a refused client
			c.Close()
		}
	}()
	return lis.Addr().String()
}

// dial handshakes (and reads a byte, so that TLS 1.3 reports a refused
// client certificate), returning the server's leaf serial.
func dial(addr string, ca *testpki.CA, cert *testpki.Leaf) (int64, error) {
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		return 0, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	first := ca.Leaf(t, testpki.LeafOpts{Server: true})
	f := first.Write(t, ca, dir, "server")
	s, err := mtls.NewServer(mtls.Files{Cert: f.Cert, Key: f.Key}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, s.Config(mtls.Require))
	if got, err := dial(addr, ca, nil); err != nil || got != first.Serial.Int64() {
		t.Fatalf("first connection: serial %d, %v; want %d", got, err, first.Serial)
	}
	// A half-done rotation (new certificate, old key) keeps the old pair.
	second := ca.Leaf(t, testpki.LeafOpts{Server: true})
	if err := os.WriteFile(f.Cert, second.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, ca, nil); err != nil || got != first.Serial.Int64() {
		t.Fatalf("mid-rotation: serial %d, %v; want the old %d", got, err, first.Serial)
	}
	if err := os.WriteFile(f.Key, second.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := dial(addr, ca, nil); err != nil || got != second.Serial.Int64() {
		t.Fatalf("after rotation: serial %d, %v; want the new %d", got, err, second.Serial)
	}
}

func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	other := testpki.NewCA(t, "other")
	f := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	s, err := mtls.NewServer(mtls.Files{Cert: f.Cert, Key: f.Key, ClientCA: f.CA}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	required := serveTLS(t, s.Config(mtls.Require))
	optional := serveTLS(t, s.Config(mtls.Optional))
	good := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/prod/sa/web"})
	for _, tc := range []struct {
		name     string
		cert     *testpki.Leaf
		required bool // accepted where certificates are required
		optional bool // accepted where they are optional
	}{
		{"good", good, true, true},
		{"none", nil, false, true},
		// A client holding only another CA's certificate does not offer
		// it (it matches none of the CAs the server asks for): it is
		// anonymous, and refused where certificates are required.
		{"other CA", other.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/x"}), false, true},
		{"expired", ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/x", Expired: true}), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := dial(required, ca, tc.cert); (err == nil) != tc.required {
				t.Errorf("certificates required: err %v, want accepted=%v", err, tc.required)
			}
			if _, err := dial(optional, ca, tc.cert); (err == nil) != tc.optional {
				t.Errorf("certificates optional: err %v, want accepted=%v", err, tc.optional)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	leaf := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/prod/sa/web"})
	cs := &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf.TLS.Leaf}}}
	if got := mtls.Identity(cs); got != "spiffe://example.org/ns/prod/sa/web" {
		t.Errorf("Identity = %q", got)
	}
	if got := mtls.Identity(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf.TLS.Leaf}}); got != "" {
		t.Errorf("Identity of an unverified certificate = %q, want none", got)
	}
	if got := mtls.Identity(nil); got != "" {
		t.Errorf("Identity(nil) = %q", got)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ca")
	f := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	for _, tc := range []mtls.Files{
		{Cert: f.Cert},
		{Cert: f.Cert, Key: dir + "/missing.key"},
		{Cert: f.Key, Key: f.Cert},
		{Cert: f.Cert, Key: f.Key, ClientCA: f.Key},
	} {
		if _, err := mtls.NewServer(tc, quiet()); err == nil {
			t.Errorf("NewServer(%+v) succeeded", tc)
		}
	}
}
