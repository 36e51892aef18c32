package main

import (
	"flag"
	"os"
	"strings"

	"github.com/xdsd/xdsd/internal/store/etcd"
)

// etcdFlags are how a command that opens a store reaches a secured etcd:
// client TLS and etcd authentication. The password is read from a file,
// never taken on the command line, where other local users see it (ps).
type etcdFlags struct {
	cert, key, ca      string
	user, passwordFile string
}

func (f *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "etcd-cert", "", "etcd store: client certificate (PEM) for etcd's --client-cert-auth; with --etcd-key")
	fs.StringVar(&f.key, "etcd-key", "", "etcd store: the client certificate's private key (PEM)")
	fs.StringVar(&f.ca, "etcd-ca", "", "etcd store: CA (PEM) that signed the etcd members' certificates; any --etcd-* TLS flag makes the connection TLS (system roots when empty)")
	fs.StringVar(&f.user, "etcd-user", "", "etcd store: user to authenticate as when etcd's auth is enabled; with --etcd-password-file")
	fs.StringVar(&f.passwordFile, "etcd-password-file", "", "etcd store: file holding --etcd-user's password (one line)")
}

// apply puts the flags into o, or says which flag is wrong and why.
func (f *etcdFlags) apply(o *etcd.Options) error {
	if f.cert != "" || f.key != "" || f.ca != "" {
		c, err := etcd.ClientTLS(f.cert, f.key, f.ca)
		if err != nil {
			return usagef("%v", err)
		}
		o.TLS = c
	}
	if (f.user == "") != (f.passwordFile == "") {
		return usagef("--etcd-user and --etcd-password-file go together: give both, or neither")
	}
	if f.user != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return usagef("--etcd-password-file: %v", err)
		}
		pw := strings.TrimRight(string(b), "\r\n")
		if pw == "" {
			return usagef("--etcd-password-file %s is empty: write --etcd-user's password in it", f.passwordFile)
		}
		o.Username, o.Password = f.user, pw
	}
	return nil
}

// set reports whether any of the flags was given.
func (f *etcdFlags) set() bool { return *f != etcdFlags{} }
