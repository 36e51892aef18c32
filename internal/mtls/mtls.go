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
	files Files
	log   *slog.Logger

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
	s := &Server{files: f, log: log}
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
			return false, fmt.Errorf("%s: %w", p, err)
		}
		now[i] = stamp{fi}
		if !s.stamps[i].same(fi) {
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return false, fmt.Errorf("TLS certificate %s with key %s: %w", s.files.Cert, s.files.Key, err)
	}
	var pool *x509.CertPool
	if s.files.ClientCA != "" {
		if pool, err = LoadPool(s.files.ClientCA); err != nil {
			return false, err
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
