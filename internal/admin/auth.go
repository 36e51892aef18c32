package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/xdsd/xdsd/internal/mtls"
)

// Access is what a credential allows.
type Access int

// The access levels: a write credential also reads.
const (
	NoAccess Access = iota
	Read
	Write
)

// Tokens are the bearer tokens of an --admin-token-file: one a line,
// "TOKEN read|write [NAME]"; blank lines and lines starting with # are
// skipped. NAME (default "token N", N its line) is who audit records and
// logs name. A file loaded by LoadTokens is re-read when it changes, so
// tokens are added and revoked without a restart.
//
// Revocation fails closed: a file that no longer parses, or is gone,
// revokes every token (an edit meant to revoke one must not leave them
// all valid) until it is fixed. That is logged as an ERROR and makes
// /readyz "degraded".
type Tokens struct {
	path string // "" when parsed from bytes

	mu     sync.Mutex
	stamp  os.FileInfo // nil while the file is missing
	list   []token
	broken error // why every token is revoked; nil while the file is good
}

type token struct {
	secret []byte
	access Access
	name   string
}

// LoadTokens reads a token file; a bad line is an error naming it.
func LoadTokens(path string) (*Tokens, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTokens(b, path)
	if err != nil {
		return nil, err
	}
	t.path, t.stamp = path, fi
	return t, nil
}

// refresh re-reads the file if it changed since it was read. A file that
// cannot be read or parsed revokes every token; the change is logged once.
func (t *Tokens) refresh(log *slog.Logger) {
	if t.path == "" {
		return
	}
	fi, err := os.Stat(t.path)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err == nil && t.stamp != nil && os.SameFile(fi, t.stamp) && fi.ModTime().Equal(t.stamp.ModTime()) && fi.Size() == t.stamp.Size():
		return
	case err != nil && t.stamp == nil && t.broken != nil:
		return // still missing: logged when it went
	}
	var next *Tokens
	if err == nil {
		next, err = LoadTokens(t.path)
	}
	if err != nil {
		t.list, t.broken, t.stamp = nil, err, fi // fi: nil when missing
		log.Error("admin token file is missing or bad: every admin token is revoked until it is fixed", "file", t.path, "error", err)
		return
	}
	if t.broken != nil {
		log.Info("admin token file fixed: its tokens are valid again", "file", t.path, "tokens", len(next.list))
	} else {
		log.Info("admin token file reloaded", "file", t.path, "tokens", len(next.list))
	}
	t.list, t.stamp, t.broken = next.list, next.stamp, nil
}

// revoked refreshes the tokens and says why every one is revoked: "" while
// the file is good.
func (t *Tokens) revoked(log *slog.Logger) string {
	t.refresh(log)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken == nil {
		return ""
	}
	return fmt.Sprintf("--admin-token-file %s: every admin token is revoked until the file is fixed: %v", t.path, t.broken)
}

// ParseTokens parses a token file's contents (file names it in errors).
func ParseTokens(b []byte, file string) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("%s:%d: want TOKEN read|write [NAME], got %d fields", file, line, len(f))
		}
		tk := token{secret: []byte(f[0]), name: fmt.Sprintf("token %d", line)}
		switch f[1] {
		case "read":
			tk.access = Read
		case "write":
			tk.access = Write
		default:
			return nil, fmt.Errorf("%s:%d: access %q: want read or write", file, line, f[1])
		}
		if len(f) == 3 {
			tk.name = f[2]
		}
		if len(tk.secret) < 16 {
			return nil, fmt.Errorf("%s:%d: the token is %d characters; want at least 16 (e.g. openssl rand -hex 32)", file, line, len(tk.secret))
		}
		t.list = append(t.list, tk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(t.list) == 0 {
		return nil, fmt.Errorf("%s: no token in it", file)
	}
	return t, nil
}

// lookup finds a presented token, comparing every entry in constant time.
func (t *Tokens) lookup(presented string) (token, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var found token
	ok := false
	for _, tk := range t.list {
		if subtle.ConstantTimeCompare(tk.secret, []byte(presented)) == 1 {
			found, ok = tk, true
		}
	}
	return found, ok
}

type whoKey struct{}

// Who is who made a request: a token's name or a client certificate's
// identity ("" when the admin API asks for no credentials).
func Who(ctx context.Context) string {
	s, _ := ctx.Value(whoKey{}).(string)
	return s
}

// needed is the access a request needs: none for the probes, write for
// anything that changes state and for a backup (it holds every secret
// whole), read for the rest.
func needed(r *http.Request) Access {
	switch {
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		return NoAccess
	case r.URL.Path == "/v1/backup":
		return Write
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return Read
	case r.URL.Path == "/v1/concerned":
		return Read // a question with a body (replicas.go)
	}
	return Write
}

// protect wraps the handler: cross-origin browser requests are refused on
// every state-changing endpoint (a page elsewhere cannot make a browser on
// the operator's machine apply or delete), and each request needs a
// credential when the API asks for them (Tokens or CertAccess set): a
// bearer token, or a client certificate CertAccess accepts. Who made the
// request goes in its context (Who) for the audit record and the logs.
//
// An API that asks for no credentials answers only requests whose Host
// names it as loopback, "localhost", the address the connection reached or
// an allowed name (Options.Hosts); anything else is answered 421. Without
// that, a page on a DNS-rebinding domain (evil.example resolving to
// 127.0.0.1) is same-origin with the API in the browser's eyes and could
// apply, or read /v1/backup. The probes need no Host check: they say
// nothing worth stealing, and load balancers name hosts freely.
//
// A request that presents no valid credential to an API that asks for
// them is answered on a connection closed afterwards, so that no
// unauthenticated client keeps an admin connection slot idle.
func protect(o Options, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, ErrorBody{Message: "cross-origin request refused: state-changing admin requests must not come from a browser page of another origin"})
	}))
	h = cop.Handler(h)
	credentialed := o.Tokens != nil || o.CertAccess != nil
	hosts := newHostCheck(o.Hosts, o.Logger)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := needed(r)
		if !credentialed {
			if need != NoAccess && !hosts.allow(w, r) {
				return
			}
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, mtls.Identity(r.TLS))))
			return
		}
		have, who := NoAccess, ""
		if r.TLS != nil && o.CertAccess != nil {
			who, have = o.CertAccess(r.TLS)
		}
		if auth := r.Header.Get("Authorization"); auth != "" && o.Tokens != nil {
			o.Tokens.refresh(o.Logger)
			presented, ok := strings.CutPrefix(auth, "Bearer ")
			tk, found := o.Tokens.lookup(presented)
			if !ok || !found {
				w.Header().Set("Connection", "close")
				w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd"`)
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Message: "the admin token is not valid"})
				return
			}
			have, who = tk.access, tk.name
		}
		if have == NoAccess {
			w.Header().Set("Connection", "close")
		}
		switch {
		case need == NoAccess || have >= need:
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
		case have == NoAccess:
			w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd"`)
			msg := "the admin API needs a token (Authorization: Bearer TOKEN; xdsd --token-file FILE)"
			if o.CertAccess != nil {
				msg += " or an admin client certificate"
			}
			if id := mtls.Identity(r.TLS); id != "" {
				msg += fmt.Sprintf("; the certificate of %s is not one (the policy gives it no admin role)", id)
			}
			writeJSON(w, http.StatusUnauthorized, ErrorBody{Message: msg})
		default:
			writeJSON(w, http.StatusForbidden, ErrorBody{Message: fmt.Sprintf("%s may read but not write: %s %s needs a write credential", who, r.Method, r.URL.Path)})
		}
	})
}

// hostCheck tells the Host names an API without credentials answers.
type hostCheck struct {
	names []string // lower case, without a trailing dot
	log   *slog.Logger
	// Refusals are logged at most a few a second (a page retrying in a
	// loop must not flood the log); the lines left out are counted in the
	// next one.
	limit   *rate.Limiter
	dropped atomic.Int64
}

func newHostCheck(names []string, log *slog.Logger) *hostCheck {
	c := &hostCheck{log: log, limit: rate.NewLimiter(1, 10)}
	for _, n := range names {
		c.names = append(c.names, strings.TrimSuffix(strings.ToLower(n), "."))
	}
	return c
}

// allow reports whether r names this server in its Host; if not, it
// answers 421 Misdirected Request and logs the host.
func (c *hostCheck) allow(w http.ResponseWriter, r *http.Request) bool {
	host := hostName(r.Host)
	if c.ok(host, r) {
		return true
	}
	if c.limit.Allow() {
		c.log.Warn("admin request refused: its Host does not name this server (DNS rebinding?); add --admin-host NAME to allow a name",
			"host", r.Host, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "refusals_not_logged", c.dropped.Swap(0))
	} else {
		c.dropped.Add(1)
	}
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusMisdirectedRequest, ErrorBody{Message: fmt.Sprintf(
		"Host %q does not name this admin API, which asks for no credentials and so answers only a loopback address, localhost, its own address or a name given with xdsd --admin-host", r.Host)})
	return false
}

func (c *hostCheck) ok(host string, r *http.Request) bool {
	if host == "" {
		return false
	}
	if host == "localhost" || slices.Contains(c.names, host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() {
		return true
	}
	// The address the connection reached: a name for this server no
	// other can take (an IP address is not rebound).
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(la.String()); err == nil && ap.Addr().Unmap().WithZone("") == ip.WithZone("") {
			return true
		}
	}
	return false
}

// hostName is a Host header's name: lower case, without the port, the
// brackets of an IPv6 address or a trailing dot.
func hostName(h string) string {
	if name, _, err := net.SplitHostPort(h); err == nil {
		h = name
	} else {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}
