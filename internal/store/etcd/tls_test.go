package etcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// tlsAuthCluster starts an etcd serving clients over TLS, requiring
// client certificates, with authentication on and user xdsd (password
// pw) allowed under prefix. It returns the cluster and the files of a
// client certificate.
func tlsAuthCluster(t *testing.T, prefix string) (*etcdtest.Cluster, testpki.Files) {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "etcd test CA")
	srv := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	cli := ca.Leaf(t, testpki.LeafOpts{}).Write(t, ca, dir, "client")
	ctls, err := etcd.ClientTLS(cli.Cert, cli.Key, cli.CA)
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.StartWith(t, 1, etcdtest.Options{CertFile: srv.Cert, KeyFile: srv.Key, CAFile: srv.CA, ClientCertAuth: true, ClientTLS: ctls})
	c.EnableAuth(t, "xdsd", "pw", prefix)
	return c, cli
}

// A store opens an etcd that serves TLS with client certificates and
// authentication, with a certificate and a user; without either it is
// refused, saying why.
func TestTLSAndAuth(t *testing.T) {
	p := freshPrefix()
	c, cli := tlsAuthCluster(t, p)
	ctls, err := etcd.ClientTLS(cli.Cert, cli.Key, cli.CA)
	if err != nil {
		t.Fatal(err)
	}
	o := etcd.Options{Endpoints: c.Endpoints(), Prefix: p, RequestTimeout: 10 * time.Second, TLS: ctls, Username: "xdsd", Password: "pw"}
	s, err := etcd.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	r, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("tls", "", "1")}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := etcd.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waitRev(t, other, r.Rev)

	quick := o
	quick.RequestTimeout = 2 * time.Second
	for what, bad := range map[string]func(*etcd.Options){
		"no password":      func(o *etcd.Options) { o.Password = "" },
		"a wrong password": func(o *etcd.Options) { o.Password = "nope" },
		"no user":          func(o *etcd.Options) { o.Username, o.Password = "", "" },
		"no TLS":           func(o *etcd.Options) { o.TLS = nil },
		"another prefix":   func(o *etcd.Options) { o.Prefix = "/elsewhere/" },
	} {
		bo := quick
		bad(&bo)
		s, err := etcd.Open(ctx, bo)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened", what)
			continue
		}
		t.Logf("%s: %v", what, err)
	}
}

func TestClientTLSErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "etcd test CA")
	f := ca.Leaf(t, testpki.LeafOpts{}).Write(t, ca, dir, "c")
	for _, tc := range []struct{ cert, key, ca, want string }{
		{f.Cert, "", "", "both --etcd-cert and --etcd-key"},
		{"", f.Key, "", "both --etcd-cert and --etcd-key"},
		{f.Cert, f.Key, f.Key, "no PEM certificate"},
		{f.Cert, f.Cert, "", "etcd client certificate"},
		{"", "", dir + "/missing", "etcd CA"},
	} {
		if _, err := etcd.ClientTLS(tc.cert, tc.key, tc.ca); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ClientTLS(%q, %q, %q): %v, want %q", tc.cert, tc.key, tc.ca, err, tc.want)
		}
	}
}
