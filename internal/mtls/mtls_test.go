package mtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveTLS accepts connections on 127.0.0.1 with cfg, completing each
// handshake and answering with the client's verified identity and a
// newline; it returns the address.
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
			tc := c.(*tls.Conn)
			_ = tc.Handshake()
			cs := tc.ConnectionState()
			io.WriteString(tc, mtls.Identity(&cs)+"\n") // fails for a refused client
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

// A client built from bootstrap files follows them too: a new client
// certificate and a new CA file are used on the next handshake.
func TestClientRotation(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := testpki.NewCA(t, "ca1"), testpki.NewCA(t, "ca2")
	sf := ca1.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca1, dir, "server")
	srv, err := mtls.NewServer(mtls.Files{Cert: sf.Cert, Key: sf.Key, ClientCA: sf.CA}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, srv.Config(mtls.Require))
	cf := ca1.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/a"}).Write(t, ca1, dir, "client")
	creds, err := mtls.NewClient(cf.CA, cf.Cert, cf.Key, quiet())
	if err != nil {
		t.Fatal(err)
	}
	identity := func() (string, error) {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			return "", err
		}
		defer raw.Close()
		c, _, err := creds.ClientHandshake(context.Background(), addr, raw)
		if err != nil {
			return "", err
		}
		b, err := io.ReadAll(c)
		return string(b), err
	}
	if got, err := identity(); err != nil || got != "spiffe://example.org/a\n" {
		t.Fatalf("first: %q %v", got, err)
	}
	next := ca1.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/b"})
	next.Write(t, ca1, dir, "client")
	if got, err := identity(); err != nil || got != "spiffe://example.org/b\n" {
		t.Fatalf("after rotating the client certificate: %q %v", got, err)
	}
	// The client trusts only its CA file: a CA file of another CA fails
	// the handshake, until it holds the server's CA again.
	if err := os.WriteFile(cf.CA, ca2.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := identity(); err == nil {
		t.Fatal("the client trusted a server its CA file does not cover")
	}
	if err := os.WriteFile(cf.CA, append(append([]byte{}, ca2.PEM...), ca1.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := identity(); err != nil || got != "spiffe://example.org/b\n" {
		t.Fatalf("after restoring the CA: %q %v", got, err)
	}
	if _, err := mtls.NewClient(cf.CA, cf.Cert, "", quiet()); err == nil {
		t.Error("a certificate without a key was accepted")
	}
}
