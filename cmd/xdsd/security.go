package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/policy"
)

// securityFlags are the daemons' TLS, policy and admin credentials
// (README "Securing xdsd").
type securityFlags struct {
	tlsCert, tlsKey, clientCA string
	adminClientCA             string
	policyFile, tokenFile     string
	insecureAdmin             bool
	adminHosts                hostFlags

	// What load made of them.
	tls     *mtls.Server
	guard   *policy.Policy
	tokens  *admin.Tokens
	adminCA []*x509.Certificate // --admin-client-ca's
}

func (f *securityFlags) registerSecurity(fs *flag.FlagSet) {
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS on the xDS and admin ports with this certificate (PEM; re-read when it changes)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM; re-read when it changes)")
	fs.StringVar(&f.clientCA, "client-ca", "", "require xDS clients to present certificates signed by these CAs (mTLS); admin credentials only for identities the --policy gives an admin role")
	fs.StringVar(&f.adminClientCA, "admin-client-ca", "", "CAs (PEM) of admin client certificates: one they sign may read and write the admin API (keep it apart from --client-ca; read at start)")
	fs.StringVar(&f.policyFile, "policy", "", "authorization policy (YAML): which client identities may see which types and names, and claim which TP2 parameters")
	fs.StringVar(&f.tokenFile, "admin-token-file", "", "admin API tokens, one a line: TOKEN read|write [NAME]; without it the admin API asks for no credentials")
	fs.BoolVar(&f.insecureAdmin, "insecure-admin", false, "allow an admin port on a non-loopback address without TLS and a token file")
	fs.Var(&f.adminHosts, "admin-host", "a Host name an admin API without credentials answers, besides loopback addresses, localhost and its own address (repeatable)")
}

// hostFlags collects repeated --admin-host NAME.
type hostFlags []string

func (h *hostFlags) String() string { return strings.Join(*h, ",") }
func (h *hostFlags) Set(s string) error {
	if s == "" || strings.ContainsAny(s, "/: \t") {
		return fmt.Errorf("want a host name such as admin.example.org (no port, scheme or path), got %q", s)
	}
	*h = append(*h, s)
	return nil
}

// adminAuth sets the admin API's credentials and the Host names it answers
// without them.
func (f *securityFlags) adminAuth(adminAddr string, o admin.Options) admin.Options {
	o.Tokens = f.tokens
	o.Hosts = append([]string(nil), f.adminHosts...)
	if host, _, err := net.SplitHostPort(adminAddr); err == nil && host != "" && net.ParseIP(host) == nil {
		o.Hosts = append(o.Hosts, host) // --admin-addr's own name
	}
	o.CertAccess = f.certAccess()
	return o
}

// certAccess says what a verified client certificate allows on the admin
// API: write when it chains to --admin-client-ca, else the admin role the
// policy gives its identity. A workload certificate is no admin
// credential unless the policy says so: otherwise any workload could read
// over the admin API what the policy denies it over xDS. nil when neither
// is configured.
func (f *securityFlags) certAccess() func(*tls.ConnectionState) (string, admin.Access) {
	roles := f.guard != nil && f.guard.HasAdminRoles()
	if f.adminCA == nil && !roles {
		return nil
	}
	return func(cs *tls.ConnectionState) (string, admin.Access) {
		id := mtls.Identity(cs)
		for _, chain := range cs.VerifiedChains {
			if len(chain) > 0 && slices.ContainsFunc(f.adminCA, chain[len(chain)-1].Equal) {
				if id == "" {
					id = "CN=" + chain[0].Subject.CommonName
				}
				return id, admin.Write
			}
		}
		if id != "" && roles {
			switch f.guard.Admin(id) {
			case policy.AdminWrite:
				return id, admin.Write
			case policy.AdminRead:
				return id, admin.Read
			}
		}
		return id, admin.NoAccess
	}
}

// loadCerts reads a PEM file of certificates.
func loadCerts(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return out, nil
}

// load reads the files the flags name; errors name the flag and file.
func (f *securityFlags) load(adminAddr string, log *slog.Logger) error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if f.clientCA != "" && f.tlsCert == "" {
		return usagef("--client-ca needs --tls-cert and --tls-key (client certificates are asked for over TLS)")
	}
	if f.tlsCert != "" {
		s, err := mtls.NewServer(mtls.Files{Cert: f.tlsCert, Key: f.tlsKey, ClientCA: f.clientCA}, log)
		if err != nil {
			return usagef("%v", err)
		}
		f.tls = s
	}
	if f.policyFile != "" {
		p, err := policy.Load(f.policyFile)
		if err != nil {
			return usagef("--policy: %v", err)
		}
		if f.clientCA == "" {
			log.Warn("--policy without --client-ca: no client has an identity, so only rules without clients apply")
		}
		f.guard = p
	}
	if f.adminClientCA != "" {
		if f.tlsCert == "" {
			return usagef("--admin-client-ca needs --tls-cert and --tls-key (client certificates are asked for over TLS)")
		}
		cas, err := loadCerts(f.adminClientCA)
		if err != nil {
			return usagef("--admin-client-ca: %v", err)
		}
		if f.clientCA != "" {
			workload, err := loadCerts(f.clientCA)
			if err != nil {
				return usagef("--client-ca: %v", err)
			}
			for _, c := range cas {
				if slices.ContainsFunc(workload, c.Equal) {
					return usagef("--admin-client-ca %s: the CA %q is in --client-ca %s too, so every workload certificate would be an admin; give admin certificates a CA of their own",
						f.adminClientCA, c.Subject, f.clientCA)
				}
			}
		}
		f.adminCA = cas
	}
	if f.tokenFile != "" {
		t, err := admin.LoadTokens(f.tokenFile)
		if err != nil {
			return usagef("--admin-token-file: %v", err)
		}
		f.tokens = t
	}
	if adminAddr != "" && !loopback(adminAddr) && !f.insecureAdmin && (f.tls == nil || f.tokens == nil && f.certAccess() == nil) {
		return usagef("--admin-addr %s is not a loopback address: anyone who reaches it could read and change the configuration; "+
			"give --tls-cert, --tls-key and --admin-token-file (or admin certificates: --admin-client-ca, or admin roles in --policy), or --insecure-admin to accept that", adminAddr)
	}
	if adminAddr != "" && f.clientCA != "" && f.adminCA == nil && (f.guard == nil || !f.guard.HasAdminRoles()) {
		log.Warn("certificates signed by --client-ca are no longer admin credentials (they read the admin API before): "+
			"give identities admin: read or admin: write in --policy, or sign admin certificates with a separate --admin-client-ca", "admin", adminAddr)
	}
	if adminAddr != "" && f.tokens == nil && f.certAccess() == nil && (f.clientCA != "" || f.policyFile != "") {
		log.Warn("the xDS port is secured (--client-ca/--policy) but the admin API asks for no credentials: any local process can read every secret and change the configuration; give --admin-token-file",
			"admin", adminAddr)
	}
	return nil
}

// loopback reports whether a listen address is on the loopback interface
// only (an empty host or 0.0.0.0 listens everywhere).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// transportCreds are the xDS port's credentials: TLS (with client
// certificates required when --client-ca is set), or nil for plaintext.
func (f *securityFlags) transportCreds() credentials.TransportCredentials {
	if f.tls == nil {
		return nil
	}
	return credentials.NewTLS(f.tls.Config(mtls.Require))
}

// adminListener serves TLS on the admin port when configured; client
// certificates are optional there (tokens are the other credential), and
// verified against --client-ca and --admin-client-ca.
func (f *securityFlags) adminListener(l net.Listener) net.Listener {
	if f.tls == nil {
		return l
	}
	base := f.tls.Config(mtls.Optional)
	if f.adminCA == nil {
		return tls.NewListener(l, base)
	}
	// The pool of both, made again only when --client-ca's changes.
	var mu sync.Mutex
	var from, both *x509.CertPool
	return tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := base.GetConfigForClient(hello)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		if both == nil || from != c.ClientCAs {
			from, both = c.ClientCAs, x509.NewCertPool()
			if c.ClientCAs != nil {
				both = c.ClientCAs.Clone()
			}
			for _, ca := range f.adminCA {
				both.AddCert(ca)
			}
		}
		c.ClientCAs = both
		mu.Unlock()
		c.ClientAuth = tls.VerifyClientCertIfGiven
		return c, nil
	}})
}

// adminClient is how the commands that call the admin API reach it:
// --admin (an address, or an http:// or https:// URL), --token-file and
// --ca-file.
type adminClient struct {
	addr, tokenFile, caFile string
}

func adminFlags(fs *flag.FlagSet, help string) *adminClient {
	a := &adminClient{}
	fs.StringVar(&a.addr, "admin", "127.0.0.1:18001", help+" (host:port, or an http:// or https:// URL)")
	fs.StringVar(&a.tokenFile, "token-file", "", "file holding the admin token to send (its first line)")
	fs.StringVar(&a.caFile, "ca-file", "", "CA certificates (PEM) to verify an https:// admin API with (default: the system's)")
	return a
}

// request makes an admin request, with the token if one is given.
func (a *adminClient) request(method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, adminURL(a.addr, path), body)
	if err != nil {
		return nil, usagef("--admin %q: %v", a.addr, err)
	}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		tok, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if tok = strings.TrimSpace(tok); tok == "" {
			return nil, usagef("--token-file %s: empty", a.tokenFile)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// client is base, verifying the admin API's certificate with --ca-file.
func (a *adminClient) client(base *http.Client) (*http.Client, error) {
	if a.caFile == "" {
		return base, nil
	}
	pem, err := os.ReadFile(a.caFile)
	if err != nil {
		return nil, usagef("--ca-file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usagef("--ca-file %s: no PEM certificate in it", a.caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c := *base
	c.Transport = tr
	return &c, nil
}

// do sends an admin request through call.
func (a *adminClient) do(base *http.Client, req *http.Request, out any) error {
	c, err := a.client(base)
	if err != nil {
		return err
	}
	return call(c, req, out)
}
