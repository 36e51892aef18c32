package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

// signalLog sends on a channel each message that holds a text.
type signalLog struct {
	text string
	c    chan string
}

func (h signalLog) Enabled(context.Context, slog.Level) bool { return true }
func (h signalLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		select {
		case h.c <- r.Message:
		default:
		}
	}
	return nil
}
func (h signalLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalLog) WithGroup(string) slog.Handler      { return h }

// An apply that comes while the index of the stored variants is being
// built (xdsd serve builds it at its start) waits for it, and says so in
// the log; the index a start builds (CheckIndex.Build) is the one the
// applies then check against.
func TestApplyWaitsForTheIndexBeingBuilt(t *testing.T) {
	st := mem.New()
	defer st.Close()
	docs, err := resource.Decode("seed.yaml", []byte(`"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: c
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: c
`))
	if err != nil {
		t.Fatal(err)
	}
	var seed store.Batch
	for _, d := range docs {
		seed.Puts = append(seed.Puts, d.Variant)
	}
	if _, err := st.Apply(t.Context(), seed); err != nil {
		t.Fatal(err)
	}
	waits := signalLog{text: "an apply waits for the client checks' index", c: make(chan string, 1)}
	log := slog.New(waits)
	ci := NewCheckIndex()
	srv := httptest.NewServer(Handler(Options{Store: st, Logger: log, CheckIndex: ci}))
	defer srv.Close()
	route := func(cluster string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/apply?source=r.yaml&client=auto", "application/yaml", strings.NewReader(`"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: r
validate_clusters: true
virtual_hosts: [{name: v, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: `+cluster+`}}]}]
`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// A build under way holds the index, as Build does.
	ci.s.mu.Lock()
	ci.s.updating.Store(true)
	ci.s.total.Store(2)
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() {
		code, body := route("c")
		done <- answer{code, body}
	}()
	select {
	case m := <-waits.c:
		t.Logf("logged: %s", m)
	case <-time.After(time.Minute):
		t.Fatal("an apply waiting for the index logged nothing in a minute")
	}
	select {
	case a := <-done:
		t.Fatalf("the apply did not wait for the index: %d %s", a.code, a.body)
	default:
	}
	ci.s.updating.Store(false)
	ci.s.mu.Unlock()
	if a := <-done; a.code != http.StatusOK {
		t.Fatalf("apply after the wait: %d %s", a.code, a.body)
	}

	// Built by Build, the index holds every stored variant, and an
	// apply's checks use it.
	if err := ci.Build(t.Context(), st, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if n := ci.s.index.Len(); n != 3 {
		t.Errorf("the built index holds %d variants, want 3 (the cluster, its endpoints, the route)", n)
	}
	if code, body := route("gone"); code != http.StatusBadRequest || !strings.Contains(body, "gone") {
		t.Errorf("a route to a missing cluster it validates: %d %s, want 400 naming it", code, body)
	}
}
