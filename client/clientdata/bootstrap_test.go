package clientdata

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"
)

// bsServer is the smallest valid xds_servers entry.
const bsServer = `{"server_uri": "localhost:18000", "channel_creds": [{"type": "insecure"}]}`

func mustParseBootstrap(t *testing.T, data string) *Bootstrap {
	t.Helper()
	b, err := ParseBootstrap([]byte(data))
	if err != nil {
		t.Fatalf("ParseBootstrap: %v\n%s", err, data)
	}
	return b
}

func mustLoadBootstrap(t *testing.T, name string) *Bootstrap {
	t.Helper()
	b, err := LoadBootstrap(filepath.Join("testdata", "bootstrap", name))
	if err != nil {
		t.Fatalf("LoadBootstrap: %v", err)
	}
	return b
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantServers(t *testing.T, what string, got, want []ServerConfig) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d servers %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.URI != w.URI || g.Transport != w.Transport || !slices.Equal(g.ServerFeatures, w.ServerFeatures) ||
			!slices.EqualFunc(g.ChannelCreds, w.ChannelCreds, func(a, b ChannelCreds) bool {
				return a.Type == b.Type && canonicalEqual(a.Config, b.Config)
			}) {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

// canonicalEqual compares JSON values, ignoring formatting.
func canonicalEqual(a, b json.RawMessage) bool {
	return string(canonicalJSON(a)) == string(canonicalJSON(b))
}

func TestParamsFor(t *testing.T) {
	const servers = `"xds_servers": [` + bsServer + `]`
	const metadata = `"node": {"metadata": {"env": "meta", "zone": "z1", "replicas": 3, "canary": true, "labels": {"team": "a"}, "list": ["x"], "none": null}}`
	tests := []struct {
		name      string
		json      string
		authority string
		legacy    bool
		want      map[string]string // nil: nothing to send
	}{
		{"legacy name: top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}}`, "", true,
			map[string]string{"env": "prod"}},
		{"legacy name ignores authorities", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"": {"dynamic_parameters": {"env": "other"}}}}`, "", true,
			map[string]string{"env": "prod"}},
		{"xdstp name: the authority's own", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {"dynamic_parameters": {"env": "canary", "v": "2"}}}}`, "a.example", false,
			map[string]string{"env": "canary", "v": "2"}},
		{"xdstp name: authority without falls back to top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {}}}`, "a.example", false,
			map[string]string{"env": "prod"}},
		{"xdstp name: empty authority name", `{` + servers + `, "authorities": {"": {"dynamic_parameters": {"k": "v"}}}}`, "", false,
			map[string]string{"k": "v"}},
		{"xdstp name: unknown authority falls back to top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}}`, "nowhere", false,
			map[string]string{"env": "prod"}},
		{"xdstp name: explicit empty authority parameters send none", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {"dynamic_parameters": {}}}}`, "a.example", false,
			nil},
		{"nothing configured", `{` + servers + `, ` + metadata + `}`, "", true, nil},
		{"node metadata: string fields only (legacy)", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true}`, "", true,
			map[string]string{"env": "meta", "zone": "z1"}},
		{"node metadata: string fields only (xdstp)", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "authorities": {"a.example": {}}}`, "a.example", false,
			map[string]string{"env": "meta", "zone": "z1"}},
		{"node metadata loses to configured parameters", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "dynamic_parameters": {"env": "prod"}}`, "", true,
			map[string]string{"env": "prod"}},
		{"node metadata loses to an explicit empty map", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "dynamic_parameters": {}}`, "", true,
			nil},
		{"node metadata without string fields", `{` + servers + `, "node": {"metadata": {"n": 1}}, "node_metadata_as_dynamic_parameters": true}`, "", true,
			nil},
		{"node metadata without a node", `{` + servers + `, "node_metadata_as_dynamic_parameters": true}`, "", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParseBootstrap(t, tt.json)
			got, ok := b.ParamsFor(tt.authority, tt.legacy)
			if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
				t.Fatalf("ParamsFor(%q, %v) = %v, %v; want %v, %v", tt.authority, tt.legacy, got, ok, tt.want, tt.want != nil)
			}
			if ok {
				// The result is a copy: changing it must not change the bootstrap.
				got["injected"] = "x"
				if again, _ := b.ParamsFor(tt.authority, tt.legacy); again["injected"] != "" {
					t.Error("ParamsFor returned the bootstrap's own map")
				}
			}
		})
	}
}

func TestServersFor(t *testing.T) {
	b := mustLoadBootstrap(t, "federation.json")
	top := b.Servers
	tests := []struct {
		name      string
		authority string
		legacy    bool
		want      []ServerConfig
		wantErr   string
	}{
		{name: "legacy name: top-level", authority: "", legacy: true, want: top},
		{name: "legacy name ignores the authority", authority: "other.example.com", legacy: true, want: top},
		{name: "authority with servers", authority: "other.example.com", want: b.Authorities["other.example.com"].Servers},
		{name: "authority without servers falls back", authority: "xds.example.com", want: top},
		{name: "empty authority name with empty xds_servers falls back", authority: "", want: top},
		{name: "unknown authority (A47)", authority: "nowhere.example.com", wantErr: `authority "nowhere.example.com" is not in "authorities"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.ServersFor(tt.authority, tt.legacy)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ServersFor error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantServers(t, "ServersFor", got, tt.want)
		})
	}
	noAuth := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`]}`)
	if _, err := noAuth.ServersFor("", false); err == nil {
		t.Error(`ServersFor("", false) without "authorities" succeeded; xdstp:/// names need authorities[""]`)
	}
}

func TestListenerName(t *testing.T) {
	b := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {
		"plain.example": {},
		"own.example": {"client_listener_resource_name_template": "xdstp://own.example/envoy.config.listener.v3.Listener/grpc/client/%s?ctx=1"},
		"fixed.example": {"client_listener_resource_name_template": "xdstp://fixed.example/envoy.config.listener.v3.Listener/one"},
		"a b": {}
	}}`)
	xdstpDefault := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`],
		"client_default_listener_resource_name_template": "xdstp://plain.example/envoy.config.listener.v3.Listener/%s",
		"authorities": {"plain.example": {}}}`)
	legacyTemplate := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`],
		"client_default_listener_resource_name_template": "listeners/%s"}`)
	tests := []struct {
		name               string
		b                  *Bootstrap
		authority, service string
		want               string
		wantErr            string
	}{
		{name: "default template %s", b: b, service: "svc", want: "svc"},
		{name: "default template keeps the service verbatim", b: b, service: "a b/c?d", want: "a b/c?d"},
		{name: "legacy default template", b: legacyTemplate, service: "a b", want: "listeners/a b"},
		{name: "xdstp default template encodes", b: xdstpDefault, service: "a b/c",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/a%20b/c"},
		{name: "authority with the default template", b: b, authority: "plain.example", service: "svc",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/svc"},
		{name: "authority percent-encodes the service, keeping /", b: b, authority: "plain.example", service: "a b/c",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/a%20b/c"},
		{name: "percent-encoding of ? and %", b: b, authority: "plain.example", service: "q?x=1%",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/q%3Fx=1%25"},
		{name: "authority with its own template", b: b, authority: "own.example", service: "a b/c",
			want: "xdstp://own.example/envoy.config.listener.v3.Listener/grpc/client/a%20b/c?ctx=1"},
		{name: "template without %s", b: b, authority: "fixed.example", service: "svc",
			want: "xdstp://fixed.example/envoy.config.listener.v3.Listener/one"},
		{name: "authority name is escaped in the default template", b: b, authority: "a b", service: "svc",
			want: "xdstp://a%20b/envoy.config.listener.v3.Listener/svc"},
		{name: "unknown authority", b: b, authority: "nowhere.example", service: "svc", wantErr: `authority "nowhere.example" is not in "authorities"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.b.ListenerName(tt.authority, tt.service)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ListenerName error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ListenerName(%q, %q) = %q, %v; want %q", tt.authority, tt.service, got, err, tt.want)
			}
		})
	}
}

func TestServerConfigDeltaAndKey(t *testing.T) {
	insecureCreds := []ChannelCreds{{Type: "insecure"}}
	base := ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"xds_v3", "ignore_resource_deletion"}}
	for _, tt := range []struct {
		transport string
		delta     bool
	}{{"", true}, {"delta", true}, {"sotw", false}} {
		s := base
		s.Transport = tt.transport
		if s.Delta() != tt.delta {
			t.Errorf("Transport %q: Delta() = %v, want %v", tt.transport, s.Delta(), tt.delta)
		}
	}

	tests := []struct {
		name string
		s    ServerConfig
		same bool // shares base's key
	}{
		{"identical", base, true},
		{"explicit delta", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures, Transport: "delta"}, true},
		{"features reordered", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"ignore_resource_deletion", "xds_v3"}}, true},
		{"other URI", ServerConfig{URI: "b:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures}, false},
		{"other creds", ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls"}}, ServerFeatures: base.ServerFeatures}, false},
		{"other features", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"xds_v3"}}, false},
		{"sotw", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures, Transport: "sotw"}, false},
	}
	for _, tt := range tests {
		if got := tt.s.Key() == base.Key(); got != tt.same {
			t.Errorf("%s: same key = %v, want %v\n%s\n%s", tt.name, got, tt.same, tt.s.Key(), base.Key())
		}
	}

	a := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"ca_certificate_file": "/ca", "certificate_file": "/c"}`)}}}
	b := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"certificate_file":"/c","ca_certificate_file":"/ca"}`)}}}
	c := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"ca_certificate_file": "/other"}`)}}}
	if a.Key() != b.Key() {
		t.Errorf("configs differing in format only have different keys:\n%s\n%s", a.Key(), b.Key())
	}
	if a.Key() == c.Key() {
		t.Error("different configs share a key")
	}

	// Two authorities in a bootstrap naming the same server share a key.
	fed := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {
		"a": {"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}], "server_features": ["b", "a"]}]},
		"b": {"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}], "server_features": ["a", "b"]}]}}}`)
	if ka, kb := fed.Authorities["a"].Servers[0].Key(), fed.Authorities["b"].Servers[0].Key(); ka != kb {
		t.Errorf("same server, different keys:\n%s\n%s", ka, kb)
	}
}

// testPKI is a CA with a server and a client certificate, as PEM files.
type testPKI struct {
	dir                    string
	caFile                 string
	clientCert, clientKey  string
	serverCert             tls.Certificate
	caPool                 *x509.CertPool
	otherCAFile, emptyFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir}
	writePEM := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	newCert := func(tmpl, parent *x509.Certificate, pub, signer any) ([]byte, *x509.Certificate) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return der, cert
	}
	newCA := func(name string) ([]byte, *x509.Certificate, *ecdsa.PrivateKey) {
		k := newKey()
		der, cert := newCert(&x509.Certificate{
			Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}, nil, &k.PublicKey, k)
		return der, cert, k
	}

	caDER, ca, caKey := newCA("xdsd test CA")
	p.caFile = writePEM("ca.pem", "CERTIFICATE", caDER)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	otherDER, _, _ := newCA("another CA")
	p.otherCAFile = writePEM("other-ca.pem", "CERTIFICATE", otherDER)

	sk := newKey()
	serverDER, _ := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &sk.PublicKey, caKey)
	p.serverCert = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: sk}

	ck := newKey()
	clientDER, _ := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "xds-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &ck.PublicKey, caKey)
	p.clientCert = writePEM("client.pem", "CERTIFICATE", clientDER)
	ckDER, err := x509.MarshalPKCS8PrivateKey(ck)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = writePEM("client-key.pem", "PRIVATE KEY", ckDER)

	p.emptyFile = filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(p.emptyFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake runs a TLS handshake between creds and a server that requires
// a client certificate from the test CA, and returns both sides' errors.
func (p *testPKI) handshake(t *testing.T, creds credentials.TransportCredentials) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		srv := tls.Server(conn, &tls.Config{
			Certificates: []tls.Certificate{p.serverCert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    p.caPool,
			NextProtos:   []string{"h2"}, // gRPC clients insist on ALPN h2
		})
		err = srv.Handshake()
		if err == nil {
			// A TLS 1.3 client finishes before the server has checked its
			// certificate; a read makes the server's verdict reach it.
			_, err = srv.Write([]byte{1})
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, _, clientErr := creds.ClientHandshake(ctx, "localhost", raw)
	if clientErr == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, clientErr = conn.Read(make([]byte, 1))
		conn.Close()
	} else {
		raw.Close()
	}
	select {
	case serverErr = <-done:
	case <-ctx.Done():
		t.Fatal("server handshake did not finish")
	}
	return clientErr, serverErr
}

func TestTransportCredentials(t *testing.T) {
	p := newTestPKI(t)
	tlsConfig := func(fields map[string]string) json.RawMessage {
		out, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	mtls := tlsConfig(map[string]string{"ca_certificate_file": p.caFile, "certificate_file": p.clientCert, "private_key_file": p.clientKey})
	tests := []struct {
		name     string
		creds    []ChannelCreds
		protocol string // SecurityProtocol of the result; "" when an error is wanted
		wantErr  string
		// handshake against the test server (which wants a client certificate)
		handshake     bool
		handshakeFail bool
	}{
		{name: "insecure", creds: []ChannelCreds{{Type: "insecure"}}, protocol: "insecure"},
		{name: "unsupported types are skipped", creds: []ChannelCreds{{Type: "google_default"}, {Type: "insecure"}}, protocol: "insecure"},
		{name: "the first supported wins", creds: []ChannelCreds{{Type: "tls"}, {Type: "insecure"}}, protocol: "tls"},
		{name: "tls with system roots", creds: []ChannelCreds{{Type: "tls"}}, protocol: "tls"},
		{name: "tls with an empty config", creds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{}`)}}, protocol: "tls"},
		{name: "mTLS from files", creds: []ChannelCreds{{Type: "tls", Config: mtls}}, protocol: "tls", handshake: true},
		{name: "tls without a client certificate is refused by an mTLS server",
			creds:    []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.caFile})}},
			protocol: "tls", handshake: true, handshakeFail: true},
		{name: "tls with the wrong CA does not trust the server",
			creds:    []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.otherCAFile, "certificate_file": p.clientCert, "private_key_file": p.clientKey})}},
			protocol: "tls", handshake: true, handshakeFail: true},
		{name: "only unsupported types", creds: []ChannelCreds{{Type: "google_default"}, {Type: "alts"}},
			wantErr: `no supported channel_creds type in ["google_default" "alts"]`},
		{name: "no creds", wantErr: "no supported channel_creds type"},
		{name: "certificate without key",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"certificate_file": p.clientCert})}},
			wantErr: "channel_creds[0] (tls): config: certificate_file and private_key_file must be given together"},
		{name: "missing CA file",
			creds:   []ChannelCreds{{Type: "insecure-ish"}, {Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": filepath.Join(p.dir, "nope.pem")})}},
			wantErr: "channel_creds[1] (tls): ca_certificate_file:"},
		{name: "CA file without certificates",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.emptyFile})}},
			wantErr: "no PEM certificate"},
		{name: "bad key file",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"certificate_file": p.clientCert, "private_key_file": p.emptyFile})}},
			wantErr: "certificate_file/private_key_file:"},
		{name: "config not an object", creds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`"x"`)}}, wantErr: "(tls): config:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ServerConfig{URI: "xds.example.com:443", ChannelCreds: tt.creds}
			creds, err := s.TransportCredentials()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), s.URI) {
					t.Fatalf("TransportCredentials() error = %v, want %q naming the server", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("TransportCredentials: %v", err)
			}
			if got := creds.Info().SecurityProtocol; got != tt.protocol {
				t.Errorf("SecurityProtocol = %q, want %q", got, tt.protocol)
			}
			if !tt.handshake {
				return
			}
			clientErr, serverErr := p.handshake(t, creds)
			if failed := clientErr != nil || serverErr != nil; failed != tt.handshakeFail {
				t.Errorf("handshake: client error %v, server error %v; want failure %v", clientErr, serverErr, tt.handshakeFail)
			}
		})
	}
}

func TestCheckCredentials(t *testing.T) {
	ok := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {"a": {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "tls"}]}]}}}`)
	if err := ok.CheckCredentials(); err != nil {
		t.Errorf("CheckCredentials: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "ca.pem")
	bad := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {"a": {}, "b": {"xds_servers": [`+bsServer+`,
		{"server_uri": "b:1", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "`+missing+`"}}]}]}}}`)
	err := bad.CheckCredentials()
	want := `bootstrap: authorities["b"].xds_servers[1]: server "b:1": channel_creds[0] (tls): ca_certificate_file: `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("CheckCredentials() = %v, want %q...", err, want)
	}
}
