package admin_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
)

// The admin API's side of a staged revision: bad canary parameters are
// refused before anything is stored; while a revision is staged, apply,
// delete, rollback and a second canary are refused with 409 naming it and
// the rollout commands; the page says it is staged; promote and abort
// close it (and only it) as new revisions recorded with what they did.
func TestStagedRevisionAPI(t *testing.T) {
	st := mem.New()
	defer st.Close()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Logger: slog.New(slog.DiscardHandler),
		Rollout: func(rev int64, _ []store.Change) rollout.Report {
			return rollout.Report{Revision: rev, Done: true, Entries: []rollout.Entry{}}
		}}))
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cluster := func(tag string) string {
		return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\nalt_stat_name: " + tag + "\n"
	}
	if code, body := do("POST", "/v1/apply?source=body", cluster("v1")); code != 200 {
		t.Fatal(body)
	}
	for _, q := range []string{"canary=0%25", "canary=25%25&bake=forever", "bake=5m", "canary=node=%5B"} {
		if code, body := do("POST", "/v1/apply?source=body&"+q, cluster("v2")); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
	if st.Rev() != 1 {
		t.Fatalf("a refused canary apply stored something: revision %d", st.Rev())
	}
	if code, body := do("POST", "/v1/apply?source=body&canary=25%25&bake=5m", cluster("v2")); code != 200 {
		t.Fatal(body)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/apply?source=body", cluster("v3")},
		{"POST", "/v1/apply?source=body&canary=50%25", cluster("v3")},
		{"POST", "/v1/apply?source=body&force=true", cluster("v3")},
		{"DELETE", "/v1/resources?type=cds&name=c", ""},
		{"POST", "/v1/rollback?rev=1", ""},
	} {
		code, body := do(c.method, c.path, c.body)
		if code != 409 || !strings.Contains(body, "revision 2 is staged for the canary 25%") || !strings.Contains(body, "xdsd rollout promote 2") || !strings.Contains(body, "xdsd rollout abort 2") {
			t.Errorf("%s %s while staged: %d %s", c.method, c.path, code, body)
		}
	}
	if code, body := do("GET", "/", ""); code != 200 || !strings.Contains(body, "revision 2 is STAGED for the canary 25%") {
		t.Errorf("the page while staged: %d\n%s", code, body)
	}
	if code, body := do("GET", "/v1/rollout?rev=2", ""); code != 200 || !strings.Contains(body, `"state": "staged"`) || !strings.Contains(body, `"bake": "5m0s"`) {
		t.Errorf("rollout of the staged revision: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/diff?from=1&to=2", ""); code != 200 || !strings.Contains(body, "revision 2 is staged for the canary 25%: what it changed reaches only") {
		t.Errorf("diff across the staged revision: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/rollout/promote?rev=1", ""); code != 409 || !strings.Contains(body, "revision 1 is not staged") {
		t.Errorf("promote of a revision not staged: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/rollout/abort?rev=2", ""); code != 200 || !strings.Contains(body, `"state": "aborted"`) {
		t.Fatalf("abort: %d %s", code, body)
	}
	vs, _ := st.StateAt(t.Context(), st.Rev(), store.Filter{})
	if st.Rev() != 3 || len(vs) != 1 || !strings.Contains(string(vs[0].Body()), "v1") {
		t.Errorf("after the abort: revision %d, %v", st.Rev(), vs)
	}
	if code, body := do("POST", "/v1/rollout/promote?rev=2", ""); code != 409 || !strings.Contains(body, "revision 2 is aborted already (by revision 3, rollout abort 2)") {
		t.Errorf("promote after the abort: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/rollout?rev=2", ""); code != 200 || !strings.Contains(body, `"state": "aborted"`) || !strings.Contains(body, `"closed_by": 3`) {
		t.Errorf("rollout of the aborted revision: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/apply?source=body", cluster("v3")); code != 200 {
		t.Errorf("apply after the abort: %d %s", code, body)
	}
}
