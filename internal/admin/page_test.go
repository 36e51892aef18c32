package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
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

func wantAll(t *testing.T, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// The web page of a server shows its revision, its resources with their
// constraints and versions, and each client's subscriptions, versions and
// last NACK — escaped, whatever the names hold.
func TestPageServer(t *testing.T) {
	st := mem.New()
	defer st.Close()
	if _, err := st.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{
		storetest.Route("r", "env=prod", "p"), storetest.Route("r", "env=test", "t"), storetest.Cluster("<b>odd</b>", "", "x"),
	}}); err != nil {
		t.Fatal(err)
	}
	clients := []protocol.StreamStatus{{NodeID: "node-1", Address: "127.0.0.1:5555", Kind: "ads-delta", Connected: time.Now(),
		Params: map[string]string{"env": "prod"},
		Types: []protocol.TypeStatus{{Type: "envoy.config.route.v3.RouteConfiguration", SentVersion: "1", AckedVersion: "1",
			Subscriptions: []protocol.Subscription{{Name: "r", Params: map[string]string{"env": "prod"}}},
			Held:          []protocol.Held{{Name: "r", Constraints: "env=prod", Version: "1-0a1b2c3d"}, {Name: "gone", Absent: true}},
			LastNack:      &protocol.Nack{Version: "2", LastGood: "1", Error: "bad <thing>"}, Nacks: 1}}}}
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Ready: func() bool { return true }, Clients: func() any { return clients },
		Page: func(context.Context, protocol.ClientQuery) (protocol.ClientPage, error) {
			return protocol.ClientPage{Clients: clients, Matched: len(clients)}, nil
		},
		Degraded: func() string { return "--watch conf: document 2: bad" }}))
	defer srv.Close()
	code, page := get(t, srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("status %d\n%s", code, page)
	}
	wantAll(t, page, "<h1>xdsd server</h1>", "revision 1", "Resources (3)", "<code>env=prod</code>", "<code>env=test</code>",
		"/v1/resources?name=r&amp;type=envoy.config.route.v3.RouteConfiguration",
		"&lt;b&gt;odd&lt;/b&gt;", "Clients (1)", "<code>node-1</code>", "127.0.0.1:5555", "ads-delta",
		// which variant the client holds (TP2), and the NACK naming the
		// rejected version apart from the one the client keeps
		"<code>r</code> <span class=\"muted\">[env=prod]</span> @1-0a1b2c3d", "<code>gone</code> <span class=\"muted\">does not exist</span>",
		"1: rejected version 2 (holds 1): bad &lt;thing&gt;",
		"degraded: --watch conf: document 2: bad")
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusOK || body != "degraded: --watch conf: document 2: bad\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if strings.Contains(page, "<b>odd</b>") {
		t.Error("a resource name went out unescaped")
	}
	if code, _ := get(t, srv.URL+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope: %d", code)
	}
}

// A relay's page shows its cache and its upstream streams.
func TestPageRelay(t *testing.T) {
	ups := []client.Upstream{{Servers: []string{"127.0.0.1:18000"}, Connecting: "127.0.0.1:18000", DownSince: "2026-11-21T10:00:00Z", LastError: "connection refused", Subscriptions: 2}}
	srv := httptest.NewServer(admin.Handler(admin.Options{
		Resources: func(context.Context) (int64, []*resource.Variant, error) {
			return 0, []*resource.Variant{storetest.Cluster("cached", "", "x")}, nil
		},
		Clients: func() any { return []protocol.StreamStatus{} },
		Page: func(context.Context, protocol.ClientQuery) (protocol.ClientPage, error) {
			return protocol.ClientPage{}, nil
		},
		Upstream: func() any { return ups },
	}))
	defer srv.Close()
	_, page := get(t, srv.URL+"/")
	wantAll(t, page, "<h1>xdsd relay</h1>", "<code>cached</code>", "down since 2026-11-21T10:00:00Z", "(trying <code>127.0.0.1:18000</code>)", "connection refused", "no client connected")
}

// JSON output shows constraints as written: "&&", not "\u0026\u0026".
func TestJSONIsNotHTMLEscaped(t *testing.T) {
	st := mem.New()
	defer st.Close()
	if _, err := st.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{storetest.Route("r", "env=prod && version=v1", "p")}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st}))
	defer srv.Close()
	_, body := get(t, srv.URL+"/v1/resources")
	if !strings.Contains(body, `"constraints": "env=prod && version=v1"`) {
		t.Errorf("/v1/resources: %s", body)
	}
}

// The page lists the first 1,000 variants in order and says how many
// more there are and where to find them all.
func TestPageListsAThousand(t *testing.T) {
	st := mem.New()
	defer st.Close()
	var b store.Batch
	for i := range 1003 {
		b.Puts = append(b.Puts, storetest.Cluster(fmt.Sprintf("c%04d", i), "", "x"))
	}
	if _, err := st.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Ready: func() bool { return true }}))
	defer srv.Close()
	_, page := get(t, srv.URL+"/")
	wantAll(t, page, "Resources (1003)", "<code>c0999</code>", `… and 3 more, not listed here: <a href="/v1/resources">all as JSON</a>`)
	if strings.Contains(page, "<code>c1000</code>") {
		t.Error("the page lists a variant past the first 1,000")
	}
	if _, body := get(t, srv.URL+"/v1/resources"); !strings.Contains(body, `"name": "c1002"`) {
		t.Error("/v1/resources lacks the last variant")
	}
}
