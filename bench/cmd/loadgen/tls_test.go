package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/bench/pki"
)

// mtlsServer is startServer requiring client certificates f.CA signs.
func mtlsServer(t *testing.T, f pki.Files) *xds {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return startServer(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})))
}

// Scenario (i) connects over mTLS, and the relay tiers spread the streams
// over several leaves: a connect with TLS files and Addrs does both.
func TestTLSOverSeveralServers(t *testing.T) {
	f, err := pki.Write(t.TempDir(), "spiffe://bench.xdsd/ns/load/sa/loadgen")
	if err != nil {
		t.Fatal(err)
	}
	plain := names(control.ClusterFormat, 5)
	xs := []*xds{mtlsServer(t, f), mtlsServer(t, f)}
	for _, x := range xs {
		x.apply(clusters(plain, 1, "initial"))
	}
	p := startLG(t)
	p.send(control.Command{Cmd: "connect", Addrs: []string{xs[0].addr, xs[1].addr}, Streams: 40, Conns: 4, Names: plain,
		TLSCA: f.CA, TLSCert: f.ClientCert, TLSKey: f.ClientKey})
	if e := p.next(); e.Event != "connected" || e.Streams != 40 {
		t.Fatalf("connect: %+v", e)
	}
	for i, x := range xs {
		ids := map[string]bool{}
		for _, c := range x.srv.Streams() {
			ids[c.Identity] = true
		}
		if n := len(x.srv.Streams()); n != 20 || !ids[f.Identity] || len(ids) != 1 {
			t.Errorf("server %d: %d streams, identities %v; want 20 of %s", i, n, ids, f.Identity)
		}
	}
	marker := fmt.Sprintf(control.MarkerFormat, 1)
	p.send(control.Command{Cmd: "expect", Marker: marker, T0: time.Now().UnixNano(), TimeoutMS: int(wait / time.Millisecond)})
	for _, x := range xs {
		x.apply(clusters(plain[:1], 1, marker))
	}
	if e := p.next(); e.Event != "received" || e.Missing != 0 || e.Streams != 40 {
		t.Fatalf("change: %+v", e)
	}

	// Without a client certificate the server refuses every stream.
	p.send(control.Command{Cmd: "connect", Addr: xs[0].addr, Streams: 2, Names: plain, TLSCA: f.CA})
	if e := p.next(); e.Event != "error" {
		t.Fatalf("connect without a certificate: %+v", e)
	}
	p.send(control.Command{Cmd: "connect", Addr: xs[0].addr, Streams: 2, Names: plain, TLSCert: f.ClientCert})
	if e := p.next(); e.Event != "error" || !strings.Contains(e.Error, "need tls_ca") {
		t.Fatalf("a certificate without a CA: %+v", e)
	}
}
