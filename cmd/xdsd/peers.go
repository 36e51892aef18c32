package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/xdsd/xdsd/internal/admin"
)

// peerFlags are how a replica asks the others' admin APIs for the fleet
// view (docs/fleet.md): which CAs it trusts for their certificates, and
// the credential it presents when their admin APIs ask for one: a token,
// or a client certificate (admin APIs that take --admin-client-ca
// certificates alone).
type peerFlags struct {
	ca, tokenFile, cert, key string
}

func (p *peerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.ca, "admin-peer-ca", "", "CA certificates (PEM) to verify the other replicas' admin APIs with, when they serve TLS (default: the system's); --store etcd:// only")
	fs.StringVar(&p.tokenFile, "admin-peer-token-file", "", "file holding the admin token (its first line) this replica presents to the other replicas' admin APIs (default: the caller's); --store etcd:// only")
	fs.StringVar(&p.cert, "admin-peer-cert", "", "client certificate (PEM) this replica presents to the other replicas' admin APIs, e.g. one --admin-client-ca signs (read at start); --store etcd:// only")
	fs.StringVar(&p.key, "admin-peer-key", "", "the private key of --admin-peer-cert (PEM)")
}

// options sets the admin API's peer client and token from the flags. A
// flag given for a lone server (no etcd store) is a usage error: it
// would do nothing.
func (p *peerFlags) options(o admin.Options, replicas bool) (admin.Options, error) {
	if !replicas && (p.ca != "" || p.tokenFile != "" || p.cert != "" || p.key != "") {
		return o, usagef("--admin-peer-ca, --admin-peer-token-file, --admin-peer-cert and --admin-peer-key are for replicas sharing an etcd store (--store etcd://…): a lone server asks no other")
	}
	if (p.cert == "") != (p.key == "") {
		return o, usagef("--admin-peer-cert and --admin-peer-key go together")
	}
	if p.ca != "" || p.cert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12} // RootCAs nil: the system's
		if p.ca != "" {
			pem, err := os.ReadFile(p.ca)
			if err != nil {
				return o, usagef("--admin-peer-ca: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return o, usagef("--admin-peer-ca %s: no PEM certificate in it", p.ca)
			}
		}
		if p.cert != "" {
			c, err := tls.LoadX509KeyPair(p.cert, p.key)
			if err != nil {
				return o, usagef("--admin-peer-cert %s, --admin-peer-key %s: %v", p.cert, p.key, err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		o.PeerClient = admin.PeerClient(cfg)
	}
	if p.tokenFile != "" {
		file := p.tokenFile
		// Read at each question, so that the token is rotated without a
		// restart; read once now so that a bad file stops the start.
		o.PeerToken = func() (string, error) { return readToken(file) }
		if _, err := o.PeerToken(); err != nil {
			return o, usagef("%v", err)
		}
	}
	return o, nil
}

// readToken reads an --admin-peer-token-file: its first line.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--admin-peer-token-file: %w", err)
	}
	tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("--admin-peer-token-file %s: empty", file)
	}
	return tok, nil
}
