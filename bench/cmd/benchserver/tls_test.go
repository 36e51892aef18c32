package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/bench/pki"
	"github.com/xdsd/xdsd/resource"
)

// tlsFirst opens a SotW stream with TLS config cfg and returns its first
// response's cluster names, or the error that ended it.
func tlsFirst(t *testing.T, addr string, cfg *tls.Config) ([]string, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "loadgen-0"}, TypeUrl: resource.ClusterURL,
		ResourceNames: names(testClusters)}); err != nil {
		return nil, err
	}
	resp, err := st.Recv()
	if err != nil {
		return nil, err
	}
	var got []string
	for n := range decode(t, resp.GetResources()) {
		got = append(got, n)
	}
	return got, nil
}

// The raw baseline serves mTLS when asked, as xdsd serve does with
// --client-ca: a client with a certificate the CA signed gets the
// clusters, one without is refused.
func TestRawMTLS(t *testing.T) {
	dir := t.TempDir()
	f, err := pki.Write(dir, "spiffe://bench.xdsd/ns/load/sa/loadgen")
	if err != nil {
		t.Fatal(err)
	}
	inst := startImpl(t, options{impl: "raw", tlsCert: f.ServerCert, tlsKey: f.ServerKey, clientCA: f.CA})
	mustCall(t, inst.handler, "POST", "/setup", control.Setup{Clusters: testClusters}, nil)
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tlsFirst(t, inst.xdsAddr, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}})
	if err != nil || len(got) != testClusters {
		t.Fatalf("with a client certificate: %v, %d clusters", err, len(got))
	}
	if _, err := tlsFirst(t, inst.xdsAddr, &tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{impl: "raw", tlsCert: "x"}, "--tls-cert and --tls-key go together"},
		{options{impl: "raw", clientCA: "x"}, "--client-ca needs --tls-cert"},
		{options{impl: "raw", tlsCert: filepath.Join(dir, "no.crt"), tlsKey: filepath.Join(dir, "no.key")}, "--tls-cert, --tls-key"},
		{options{impl: "xdsd", store: "bolt:" + filepath.Join(dir, "missing", "x.db")}, "--store bolt:"},
		{options{impl: "raw", store: "bolt:x.db"}, "--store is only for --impl xdsd"},
	} {
		if _, err := start(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

// The embedded server on a bolt file, as scenario (h) runs it beside
// xdsd serve: set up, changed, and the state is in the file.
func TestXdsdBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.db")
	inst := startImpl(t, options{impl: "xdsd", store: "bolt:" + path})
	mustCall(t, inst.handler, "POST", "/setup", control.Setup{Clusters: testClusters}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	next := sotw(t, ctx, inst.xdsAddr, names(testClusters))
	mustCall(t, inst.handler, "POST", "/change", control.Change{Round: 1, Count: 1}, nil)
	checkMarked(t, next(), 1)
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("bolt file: %v", err)
	}
	if code := call(t, inst.handler, "GET", "/stats", nil, nil); code != http.StatusOK {
		t.Fatalf("stats: %d", code)
	}
}
