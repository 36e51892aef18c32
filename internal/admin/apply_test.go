package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store/mem"
)

// A body sent as application/json must be strict JSON: YAML's flow style
// (single quotes, a trailing comma) is refused with the line and column,
// and nothing is applied. Without that content type it is read as YAML.
func TestApplyJSONIsStrict(t *testing.T) {
	st := mem.New()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Logger: slog.New(slog.DiscardHandler)}))
	defer srv.Close()
	post := func(ctype, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/apply?source=body", ctype, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	const lax = `{'@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', "name": "a",}`
	code, body := post("application/json; charset=utf-8", lax)
	if code != http.StatusBadRequest || !strings.Contains(body, `"line": 1,`) || !strings.Contains(body, `"column": 2,`) || !strings.Contains(body, `invalid JSON: invalid character`) {
		t.Errorf("lax JSON as application/json: %d %s", code, body)
	}
	if st.Rev() != 0 {
		t.Errorf("applied: revision %d", st.Rev())
	}
	if code, body := post("application/yaml", lax); code != http.StatusOK {
		t.Errorf("the same as YAML: %d %s", code, body)
	}
}
