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
// the token it presents when their admin APIs ask for credentials.
type peerFlags struct {
	ca, tokenFile string
}

func (p *peerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.ca, "admin-peer-ca", "", "CA certificates (PEM) to verify the other replicas' admin APIs with, when they serve TLS (default: the system's); --store etcd:// only")
	fs.StringVar(&p.tokenFile, "admin-peer-token-file", "", "file holding the admin token (its first line) this replica presents to the other replicas' admin APIs (default: the caller's); --store etcd:// only")
}

// options sets the admin API's peer client and token from the flags. A
// flag given for a lone server (no etcd store) is a usage error: it
// would do nothing.
func (p *peerFlags) options(o admin.Options, replicas bool) (admin.Options, error) {
	if !replicas && (p.ca != "" || p.tokenFile != "") {
		return o, usagef("--admin-peer-ca and --admin-peer-token-file are for replicas sharing an etcd store (--store etcd://…): a lone server asks no other")
	}
	if p.ca != "" {
		pem, err := os.ReadFile(p.ca)
		if err != nil {
			return o, usagef("--admin-peer-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return o, usagef("--admin-peer-ca %s: no PEM certificate in it", p.ca)
		}
		o.PeerClient = admin.PeerClient(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
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
