package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/resource"
)

// Two replicas on one etcd: a plain write through B that checked "no
// staged revision" before a canary apply through A committed is refused
// with 409 naming the staged revision, instead of landing on top of it;
// a plain write through A in the same moment does not make B's fail. The
// moment is forced: B's watch guard (Options.Owned), which runs between
// B's check and B's write, makes the write through A.
func TestPlainWriteRacingStageAcrossReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	open := func() *etcd.Store {
		s, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/race/", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stA, stB := open(), open()
	report := func(rev int64, _ []store.Change) rollout.Report {
		return rollout.Report{Revision: rev, Done: true, Entries: []rollout.Entry{}}
	}
	srvA := httptest.NewServer(admin.Handler(admin.Options{Store: stA, Logger: slog.New(slog.DiscardHandler), Rollout: report}))
	defer srvA.Close()
	do := func(base, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cluster := func(name, tag string) string {
		return "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: " + name + "\nalt_stat_name: " + tag + "\n"
	}
	// meanwhile, when set, is the request made through A while B is
	// between its check and its write.
	var meanwhile atomic.Pointer[func()]
	srvB := httptest.NewServer(admin.Handler(admin.Options{Store: stB, Logger: slog.New(slog.DiscardHandler), Rollout: report,
		Owned: func(context.Context) (map[resource.Key]string, error) {
			if f := meanwhile.Swap(nil); f != nil {
				(*f)()
			}
			return nil, nil
		}}))
	defer srvB.Close()
	if code, body := do(srvB.URL, "POST", "/v1/apply?source=body", cluster("c", "v1")+"---\n"+cluster("d", "v1")); code != 200 {
		t.Fatal(body)
	}
	through := func(method, path, body string) {
		f := func() {
			if code, out := do(srvA.URL, method, path, body); code != 200 {
				t.Errorf("%s %s through A: %d %s", method, path, code, out)
			}
		}
		meanwhile.Store(&f)
	}
	// caughtUp waits until both replicas hold revision rev. A replica
	// follows etcd's watch: until it has seen the other's last write, a
	// write through it is computed at an older revision and refused 409
	// "the store changed since the batch was computed" (seen under load,
	// the canary through A computed at 4 with B's delete at 5), which is
	// not the race this test forces.
	caughtUp := func(rev int64) {
		t.Helper()
		deadline := time.After(testutil.Wait)
		for name, s := range map[string]*etcd.Store{"A": stA, "B": stB} {
			for {
				updated := s.Updated()
				if s.Rev() >= rev {
					break
				}
				select {
				case <-updated:
				case <-deadline:
					t.Fatalf("replica %s did not see revision %d within %v (it holds %d)", name, rev, testutil.Wait, s.Rev())
				}
			}
		}
	}

	// A plain apply through A meanwhile: B's apply and delete still
	// succeed, each on top of A's.
	caughtUp(1)
	through("POST", "/v1/apply?source=body", cluster("c", "a2"))
	if code, body := do(srvB.URL, "POST", "/v1/apply?source=body", cluster("d", "b3")); code != 200 || !strings.Contains(body, `"revision": 3`) {
		t.Errorf("apply through B racing a plain apply through A: %d %s", code, body)
	}
	caughtUp(3)
	through("POST", "/v1/apply?source=body", cluster("c", "a4"))
	if code, body := do(srvB.URL, "DELETE", "/v1/resources?type=cds&name=d", ""); code != 200 || !strings.Contains(body, `"revision": 5`) {
		t.Errorf("delete through B racing a plain apply through A: %d %s", code, body)
	}

	// A canary apply through A meanwhile: B's apply and delete are
	// refused, naming it, and nothing lands on top of it.
	caughtUp(5)
	through("POST", "/v1/apply?source=body&canary=25%25", cluster("c", "staged"))
	if code, body := do(srvB.URL, "POST", "/v1/apply?source=body", cluster("c", "b7")); code != 409 || !strings.Contains(body, "revision 6 is staged for the canary 25%") {
		t.Errorf("apply through B racing a canary apply through A: %d %s", code, body)
	}
	if code, body := do(srvA.URL, "POST", "/v1/rollout/abort?rev=6", ""); code != 200 {
		t.Fatalf("abort: %d %s", code, body)
	}
	caughtUp(7)
	through("POST", "/v1/apply?source=body&canary=25%25", cluster("c", "staged"))
	if code, body := do(srvB.URL, "DELETE", "/v1/resources?type=cds&name=c", ""); code != 409 || !strings.Contains(body, "revision 8 is staged for the canary 25%") {
		t.Errorf("delete through B racing a canary apply through A: %d %s", code, body)
	}
	l, err := stA.Revisions(t.Context(), store.HistoryQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rec, staged, _ := store.StagedIn(l); !staged || rec.Rev != 8 {
		t.Errorf("the store's latest revision %d is not the staged revision 8", l.Rev)
	}
}
