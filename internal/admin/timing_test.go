package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store/mem"
)

// An apply answers with a Server-Timing header naming its phases in
// order, each with its milliseconds, then the total; an apply that is
// refused has none (its phases did not all run).
func TestApplyServerTiming(t *testing.T) {
	st := mem.New()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	post := func(query, body string) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/apply?source=body"+query, "application/yaml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	const cluster = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: a\nconnect_timeout: 1s\n"
	metric := regexp.MustCompile(`^([a-z]+);dur=([0-9]+\.[0-9]{3})$`)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"&client=auto", []string{"staged", "groups", "decode", "checks", "guard", "commit", "served", "total"}},
		{"&client=none", []string{"staged", "decode", "guard", "commit", "served", "total"}},
	} {
		resp := post(c.query, cluster)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", c.query, resp.Status)
		}
		h := resp.Header.Get("Server-Timing")
		var names []string
		for _, m := range strings.Split(h, ", ") {
			sm := metric.FindStringSubmatch(m)
			if sm == nil {
				t.Fatalf("%s: Server-Timing %q: %q is not name;dur=MS", c.query, h, m)
			}
			names = append(names, sm[1])
		}
		if strings.Join(names, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: Server-Timing %q: phases %v, want %v", c.query, h, names, c.want)
		}
	}
	if resp := post("", "name: no type\n"); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Server-Timing") != "" {
		t.Errorf("a refused apply: %s, Server-Timing %q", resp.Status, resp.Header.Get("Server-Timing"))
	}
}
