package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
)

// serve and restore reach an etcd that serves TLS, requires client
// certificates and has authentication on, with --etcd-cert/--etcd-key/
// --etcd-ca, --etcd-user and --etcd-password-file; without the password,
// or with the flags on a bolt store, they refuse, saying which flag.
func TestEtcdTLSAndAuthFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "etcd test CA")
	srv := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	cli := ca.Leaf(t, testpki.LeafOpts{}).Write(t, ca, dir, "client")
	ctls, err := etcd.ClientTLS(cli.Cert, cli.Key, cli.CA)
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.StartWith(t, 1, etcdtest.Options{CertFile: srv.Cert, KeyFile: srv.Key, CAFile: srv.CA, ClientCertAuth: true, ClientTLS: ctls})
	c.EnableAuth(t, "xdsd", "s3cret", "/secured/")
	pw := writeFile(t, dir, "pw", "s3cret\n")
	url := c.URL("secured")
	flags := []string{"--store", url, "--etcd-cert", cli.Cert, "--etcd-key", cli.Key, "--etcd-ca", cli.CA, "--etcd-user", "xdsd", "--etcd-password-file", pw}

	_, adm := startServe(t, flags...)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", cl+"name: a\nalt_stat_name: v1\n")); code != 0 {
		t.Fatal(errOut)
	}
	backup := filepath.Join(dir, "backup.db")
	if code, _, errOut := runCmd(t, "backup", "--admin", adm, backup); code != 0 {
		t.Fatal(errOut)
	}
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "c.yaml", cl+"name: a\nalt_stat_name: v2\n")); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCmd(t, append(append([]string{"restore"}, flags...), backup)...)
	if code != 0 || !strings.Contains(out, "restored the state of revision 1") {
		t.Fatalf("restore into the secured etcd: %d %s %s", code, out, errOut)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore", "--store", url, "--etcd-cert", cli.Cert, "--etcd-key", cli.Key, "--etcd-ca", cli.CA, backup}, 1, "permission denied"},
		{[]string{"restore", "--store", url, "--etcd-user", "xdsd", backup}, 2, "--etcd-user and --etcd-password-file go together"},
		{[]string{"restore", "--store", url, "--etcd-cert", cli.Cert, backup}, 2, "both --etcd-cert and --etcd-key"},
		{[]string{"restore", "--store", url, "--etcd-ca", cli.Key, backup}, 2, "no PEM certificate"},
		{[]string{"restore", "--store", url, "--etcd-user", "xdsd", "--etcd-password-file", writeFile(t, dir, "empty", "\n"), backup}, 2, "is empty"},
		{[]string{"restore", "--store", "bolt:" + filepath.Join(dir, "x.db"), "--etcd-user", "xdsd", backup}, 2, "are for --store etcd://"},
		{[]string{"serve", "--store", "mem:", "--etcd-ca", cli.CA}, 2, "are for --store etcd://"},
	} {
		code, _, errOut := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d: %s, want exit %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
