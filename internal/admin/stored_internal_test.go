package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/resource"
)

// The index of the stored variants a replica keeps between applies
// follows every change — its own applies, deletes and rollbacks, and
// another replica's writes, which reach it through the store — and the
// checks on it judge a batch exactly as on an index built afresh from
// the store, and as on a checker given every stored variant.
func TestKeptIndexJudgesAsAFreshOne(t *testing.T) {
	c := etcdtest.Start(t, 1)
	open := func() *etcd.Store {
		s, err := etcd.Open(t.Context(), etcd.Options{Endpoints: c.Endpoints(), Prefix: "/kept/", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	stA, stB := open(), open()
	serve := func(st store.Store) (*api, *httptest.Server) {
		a := &api{checks: NewCheckIndex(), o: Options{Store: st, Logger: slog.New(slog.DiscardHandler), Identity: func(*http.Request) string { return "test" }}}
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/apply", a.apply)
		mux.HandleFunc("DELETE /v1/resources", a.delete)
		mux.HandleFunc("POST /v1/rollback", a.rollback)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return a, srv
	}
	a, srvA := serve(stA)
	_, srvB := serve(stB)
	do := func(srv *httptest.Server, method, path, body string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		// A follows the store's change feed: a write through B reaches
		// it a moment later. Wait for it, so that the kept index and a
		// fresh one are built from the same revision.
		var res struct {
			Revision int64 `json:"revision"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.Revision == 0 {
			t.Fatalf("%s %s: no revision in %s", method, path, out)
		}
		deadline := time.After(30 * time.Second)
		for {
			updated := stA.Updated()
			if stA.Rev() >= res.Revision {
				break
			}
			select {
			case <-updated:
			case <-deadline:
				t.Fatalf("replica A did not reach revision %d (at %d)", res.Revision, stA.Rev())
			}
		}
	}
	route := func(name string, clusters ...string) string {
		var rs []string
		for _, c := range clusters {
			rs = append(rs, fmt.Sprintf("{match: {prefix: /%s}, route: {cluster: %s}}", c, c))
		}
		return fmt.Sprintf("---\n\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: %s\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [%s]}]\n", name, strings.Join(rs, ", "))
	}
	listener := func(name, route string, port int) string {
		return fmt.Sprintf(`---
"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: %s
address: {socket_address: {address: 0.0.0.0, port_value: %d}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
      rds: {route_config_name: %s, config_source: {ads: {}}}
      http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`, name, port, route)
	}
	cluster := func(name, constraints string) string {
		body := "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: " + name + "\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n"
		if constraints != "" {
			body = "constraints: " + constraints + "\nresource:\n  " + strings.ReplaceAll(strings.TrimSuffix(body, "\n"), "\n", "\n  ") + "\n"
		}
		return "---\n" + body
	}
	endpoints := func(name string) string {
		return "---\n\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: " + name + "\n"
	}
	// probes are batches whose findings depend on what is stored: a route
	// to clusters that come and go, a cluster whose variants a stored
	// route needs, a listener on a stored listener's port.
	probes := []string{
		route("r9", "c1", "c2", "c3"),
		cluster("c1", "env=prod"),
		listener("l9", "r1", 80),
		route("r1", "c4") + cluster("c2", ""),
	}
	judge := func(step string) {
		t.Helper()
		fresh := &storedSummaries{}
		for _, p := range probes {
			docs, err := resource.Decode("probe.yaml", []byte(p))
			if err != nil {
				t.Fatal(err)
			}
			verdict := func(s *storedSummaries, whole bool) []string {
				k := clientcheck.New(clientcheck.Auto)
				for _, d := range docs {
					k.Add(d)
				}
				var out []string
				err := s.check(t.Context(), stA, nil, func(x *clientcheck.Index) {
					if whole {
						x.AddTo(k, nil)
					} else {
						k.On(x)
					}
					for _, f := range k.Findings() {
						out = append(out, fmt.Sprintf("%s %d", f, f.Severity))
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			kept, again, whole := verdict(a.stored(), false), verdict(fresh, false), verdict(fresh, true)
			if !slices.Equal(kept, again) || !slices.Equal(kept, whole) {
				t.Errorf("%s, probe %q:\nkept index:\n%s\nfresh index:\n%s\nevery stored variant:\n%s", step, p,
					strings.Join(kept, "\n"), strings.Join(again, "\n"), strings.Join(whole, "\n"))
			}
		}
		if a.stored().index.Len() != fresh.index.Len() {
			t.Errorf("%s: the kept index holds %d variants, a fresh one %d", step, a.stored().index.Len(), fresh.index.Len())
		}
	}

	judge("empty")
	do(srvA, "POST", "/v1/apply?source=body&client=auto", listener("l1", "r1", 80)+route("r1", "c1", "c2")+cluster("c1", "")+endpoints("c1")+cluster("c2", "env=prod")+cluster("c2", "env!=prod")+endpoints("c2"))
	judge("applied through A")
	do(srvA, "DELETE", "/v1/resources?type=cds&name=c1", "")
	judge("deleted through A")
	do(srvA, "POST", "/v1/rollback?rev=1", "")
	judge("rolled back through A")
	do(srvB, "POST", "/v1/apply?source=body&client=none", cluster("c3", "zone=a")+endpoints("c3")+listener("l2", "r2", 80)+route("r2", "c3"))
	judge("applied through B")
	do(srvB, "DELETE", "/v1/resources?type=cds&name=c2", "")
	judge("deleted through B")
	do(srvA, "POST", "/v1/apply?source=body&client=auto&force=true", cluster("c1", "env=prod")+route("r1", "c1", "c3"))
	judge("applied through A again")
}
