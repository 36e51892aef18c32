package admin

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The Host names an admin API without credentials answers (DNS
// rebinding, issue 27 point 1).
func TestHostCheck(t *testing.T) {
	c := newHostCheck([]string{"Admin.Example.org."}, slog.New(slog.DiscardHandler))
	local := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 18001}
	for host, want := range map[string]bool{
		"127.0.0.1:18001":          true,
		"127.9.9.9":                true,
		"[::1]:18001":              true,
		"[::1]":                    true,
		"[::ffff:127.0.0.1]:18001": true,
		"localhost:18001":          true,
		"LocalHost.:1":             true,
		"10.1.2.3:18001":           true, // the address the connection reached
		"admin.example.org:443":    true,
		"admin.example.org":        true,
		"":                         false,
		"evil.example:18001":       false,
		"localhost.evil.example":   false,
		"10.1.2.4:18001":           false,
		"127.0.0.1.nip.io":         false,
		"example.org":              false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/resources", nil)
		r.Host = host
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(local)))
		w := httptest.NewRecorder()
		if got := c.allow(w, r); got != want {
			t.Errorf("Host %q: allowed %v, want %v", host, got, want)
		} else if !got && w.Code != http.StatusMisdirectedRequest {
			t.Errorf("Host %q: answered %d, want 421", host, w.Code)
		}
	}
}
