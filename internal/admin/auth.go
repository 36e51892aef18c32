package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

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
	}
	return Write
}

// protect wraps the handler: cross-origin browser requests are refused on
// every state-changing endpoint (a page elsewhere cannot make a browser on
// the operator's machine apply or delete), and, with tokens, each request
// needs a credential: a bearer token, or (reads) a verified client
// certificate. Who made the request goes in its context (Who) for the
// audit record and the logs.
func protect(o Options, h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, ErrorBody{Message: "cross-origin request refused: state-changing admin requests must not come from a browser page of another origin"})
	}))
	h = cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		have, who := NoAccess, mtls.Identity(r.TLS)
		if who != "" {
			have = Read
		}
		if auth := r.Header.Get("Authorization"); auth != "" && o.Tokens != nil {
			o.Tokens.refresh(o.Logger)
			presented, ok := strings.CutPrefix(auth, "Bearer ")
			tk, found := o.Tokens.lookup(presented)
			if !ok || !found {
				w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd"`)
				writeJSON(w, http.StatusUnauthorized, ErrorBody{Message: "the admin token is not valid"})
				return
			}
			have, who = tk.access, tk.name
		}
		need := needed(r)
		switch {
		case o.Tokens == nil || need == NoAccess || have >= need:
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, who)))
		case have == NoAccess:
			w.Header().Set("WWW-Authenticate", `Bearer realm="xdsd"`)
			writeJSON(w, http.StatusUnauthorized, ErrorBody{Message: "the admin API needs a token (Authorization: Bearer TOKEN; xdsd --token-file FILE) or a client certificate"})
		default:
			writeJSON(w, http.StatusForbidden, ErrorBody{Message: fmt.Sprintf("%s may read but not write: %s %s needs a write token", who, r.Method, r.URL.Path)})
		}
	})
}
