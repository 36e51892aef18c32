// Package pki makes the certificates of the benchmark's TLS scenarios, as
// files a user would have: a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate whose URI SAN (a SPIFFE ID) is the
// identity an xdsd policy matches. Nothing is checked in; each run makes
// its own, valid for a day.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Files are the paths of what Write wrote (PEM).
type Files struct {
	CA                    string // the CA's certificate: servers' and clients' trust
	ServerCert, ServerKey string // for 127.0.0.1 and localhost
	ClientCert, ClientKey string // URI SAN: the identity given to Write
	Identity              string
}

// Write makes a CA, a server certificate and a client certificate with
// identity as its URI SAN, and writes them to dir.
func Write(dir, identity string) (Files, error) {
	id, err := url.Parse(identity)
	if err != nil || id.Scheme == "" {
		return Files{}, fmt.Errorf("client identity %q: want a URI such as spiffe://bench.xdsd/ns/load/sa/loadgen", identity)
	}
	f := Files{
		CA:         filepath.Join(dir, "ca.crt"),
		ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key"),
		Identity: identity,
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "xdsbench CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return f, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(serial int64, tmpl *x509.Certificate, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", kder)
	}
	if err := leaf(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "xdsbench server"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, f.ServerCert, f.ServerKey); err != nil {
		return f, err
	}
	err = leaf(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "xdsbench client"},
		URIs:        []*url.URL{id},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, f.ClientCert, f.ClientKey)
	return f, err
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
