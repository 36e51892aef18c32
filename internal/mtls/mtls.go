// Package mtls serves TLS from certificate files that are re-read when they
// change, and tells a client's identity: the URI SAN (a SPIFFE ID such as
// spiffe://example.org/ns/prod/sa/web) of the certificate it presented and
// the server verified.
//
// Rotation needs no restart: every handshake looks at the files (a stat
// each) and, when one changed, loads them again. A half-written rotation (a
// new certificate beside the old key) fails to load and keeps the last good
// pair, so a rotation in two steps never takes the port down; it is retried
// on the next handshake.
package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// Files names a server's certificate files.
type Files struct {
	Cert, Key string // the server's certificate chain and private key (PEM)
	// ClientCA, if set, holds the CAs client certificates must chain to.
	ClientCA string
}

// Server is a TLS server configuration that follows its files.
type Server struct {
	files  Files
	labels [3]string // what errors call the files: flags or bootstrap fields
	log    *slog.Logger

	mu     sync.Mutex
	stamps [3]stamp
	cert   *tls.Certificate
	pool   *x509.CertPool
}

// stamp is what says a file changed: its size, modification time and
// identity (a rename over it makes another file).
type stamp struct {
	fi os.FileInfo
}

func (s stamp) same(fi os.FileInfo) bool {
	return s.fi != nil && fi != nil && os.SameFile(s.fi, fi) && s.fi.ModTime().Equal(fi.ModTime()) && s.fi.Size() == fi.Size()
}

// NewServer loads f's files; it fails, naming the file, when one cannot be
// read or parsed, or the key does not match the certificate.
func NewServer(f Files, log *slog.Logger) (*Server, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("a TLS certificate needs both --tls-cert and --tls-key")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{files: f, labels: [3]string{"--tls-cert", "--tls-key", "--client-ca"}, log: log}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// paths are the files watched, in stamp order.
func (s *Server) paths() [3]string { return [3]string{s.files.Cert, s.files.Key, s.files.ClientCA} }

// reload loads the files if any changed since the last load (s.mu held or
// not yet shared). It reports whether it loaded.
func (s *Server) reload() (bool, error) {
	var now [3]stamp
	changed := false
	for i, p := range s.paths() {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return false, fmt.Errorf("%s: %w", s.labels[i], err)
		}
		now[i] = stamp{fi}
		if !s.stamps[i].same(fi) {
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	var cert tls.Certificate
	if s.files.Cert != "" {
		var err error
		if cert, err = tls.LoadX509KeyPair(s.files.Cert, s.files.Key); err != nil {
			return false, fmt.Errorf("%s/%s: %s with %s: %w", s.labels[0], s.labels[1], s.files.Cert, s.files.Key, err)
		}
	}
	var pool *x509.CertPool
	var err error
	if s.files.ClientCA != "" {
		if pool, err = LoadPool(s.files.ClientCA); err != nil {
			return false, fmt.Errorf("%s: %w", s.labels[2], err)
		}
	}
	s.cert, s.pool, s.stamps = &cert, pool, now
	return true, nil
}

// LoadPool reads a PEM file of CA certificates.
func LoadPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// current returns the pair and pool, reloaded if the files changed. A
// failed reload keeps the last good ones, and is logged.
func (s *Server) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loaded, err := s.reload()
	switch {
	case err != nil:
		s.log.Warn("TLS files changed but could not be loaded; serving the previous certificate", "error", err)
	case loaded:
		s.log.Info("TLS files reloaded", "cert", s.files.Cert, "client_ca", s.files.ClientCA)
	}
	return s.cert, s.pool
}

// Auth is how a port treats client certificates.
type Auth int

const (
	// Require: a client must present a certificate signed by the client
	// CA (mTLS), when one is configured.
	Require Auth = iota
	// Optional: a client may present one; if it does, it must verify.
	Optional
)

// Config is a tls.Config serving the current files: each handshake
// gets the certificate and client CAs as they are on disk then.
func (s *Server) Config(a Auth) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}}
			if pool != nil {
				c.ClientCAs = pool
				c.ClientAuth = tls.RequireAndVerifyClientCert
				if a == Optional {
					c.ClientAuth = tls.VerifyClientCertIfGiven
				}
			}
			return c, nil
		},
	}
}

// Identity is the identity a verified TLS connection's client certificate
// carries: its first URI SAN; "" without a verified client certificate.
func Identity(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	leaf := cs.VerifiedChains[0][0]
	if len(leaf.URIs) == 0 {
		return ""
	}
	return leaf.URIs[0].String()
}

// FromContext is the identity of a gRPC stream's client.
func FromContext(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		return Identity(&ti.State)
	}
	return ""
}

// NewClient returns the transport credentials of a client following its
// files, the "tls" channel credentials of a gRPC xDS bootstrap (gRFC A65,
// the file-watcher certificate provider's fields): caFile the roots the
// server's certificate must chain to ("" for the system's), certFile and
// keyFile the client certificate ("" for none). Like a server's, the files
// are looked at on each handshake and re-read when they change, so a
// long-lived client follows a rotation without a restart.
func NewClient(caFile, certFile, keyFile string, log *slog.Logger) (credentials.TransportCredentials, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("config: certificate_file and private_key_file must be given together")
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{files: Files{Cert: certFile, Key: keyFile, ClientCA: caFile},
		labels: [3]string{"certificate_file", "private_key_file", "ca_certificate_file"}, log: log}
	if _, err := s.reload(); err != nil {
		return nil, err
	}
	return &clientCreds{s: s, TransportCredentials: credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})}, nil
}

// clientCreds hands each handshake to TLS credentials made from the files
// as they are then. (The embedded credentials answer Info and refuse the
// server side.)
type clientCreds struct {
	credentials.TransportCredentials
	s          *Server
	serverName string
}

func (c *clientCreds) config() *tls.Config {
	cert, pool := c.s.current()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: c.serverName}
	if c.s.files.Cert != "" {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return credentials.NewTLS(c.config()).ClientHandshake(ctx, authority, conn)
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cc := *c
	return &cc
}

// OverrideServerName is part of credentials.TransportCredentials.
//
// Deprecated: as in gRPC, use grpc.WithAuthority instead.
func (c *clientCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
