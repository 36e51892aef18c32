package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// events collects a watcher's events; await waits for a matching one,
// passing over others (an apply reaches a server's streams a moment after
// the admin API answers, so a first answer may be "does not exist").
type events struct {
	t  *testing.T
	ch chan client.Event
}

func newEvents(t *testing.T) *events { return &events{t: t, ch: make(chan client.Event, 1000)} }

func (e *events) handle(ev client.Event) { e.ch <- ev }

func (e *events) await(kind client.EventKind, name, contains string) client.Event {
	e.t.Helper()
	deadline := time.After(30 * time.Second)
	var seen []string
	for {
		select {
		case ev := <-e.ch:
			s := show(ev)
			if ev.Kind == kind && (name == "" || ev.Name == name) && strings.Contains(s, contains) {
				return ev
			}
			seen = append(seen, s)
		case <-deadline:
			e.t.Fatalf("no %v event for %s containing %q; saw %q", kind, name, contains, seen)
		}
	}
}

func show(ev client.Event) string {
	s := fmt.Sprintf("%v %s", ev.Kind, ev.Name)
	if ev.Variant != nil {
		s += " v" + ev.Variant.Version
		if m, err := ev.Variant.Message(); err == nil {
			js, _ := json.Marshal(m)
			s += " " + string(js)
		}
	}
	if ev.Err != nil {
		s += " err=" + ev.Err.Error()
	}
	return s
}

// barrier watches a resource applied now: once it arrives, the server has
// handled every request the client sent before, and the client has
// delivered every response sent before it (both go in order).
func barrier(t *testing.T, x *proc, c *client.Client) {
	t.Helper()
	n := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	x.apply(t, fmt.Sprintf("\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: %s\n", n))
	ev := newEvents(t)
	cancel, err := c.Watch(t.Context(), resource.SecretURL, n, ev.handle)
	if err != nil {
		t.Fatal(err)
	}
	ev.await(client.Updated, n, "")
	<-cancel()
}

func clusterDoc(n, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: %q\nalt_stat_name: %q\n", n, tag)
}

func newXdsClient(t *testing.T, bootstrapJSON []byte, o client.Options) *client.Client {
	t.Helper()
	b, err := client.ParseBootstrap(bootstrapJSON)
	if err != nil {
		t.Fatal(err)
	}
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.BackoffBase == 0 {
		o.BackoffBase, o.BackoffMax = 50*time.Millisecond, 500*time.Millisecond
	}
	c, err := client.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// The server process restarted mid-watch: watchers keep their last values,
// and over delta the client resyncs without downloading again what did not
// change.
func TestClientServerRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	x := startXdsdAt(t, path, "127.0.0.1:0")
	x.apply(t, clusterDoc("a", "1")+"---\n"+clusterDoc("b", "1"))
	c := newXdsClient(t, bootstrap(x.xds, nil, nil), client.Options{})
	ea, eb := newEvents(t), newEvents(t)
	c.Watch(t.Context(), resource.ClusterURL, "a", ea.handle)
	c.Watch(t.Context(), resource.ClusterURL, "b", eb.handle)
	ea.await(client.Updated, "a", `"1"`)
	eb.await(client.Updated, "b", `"1"`)
	received := c.Stats().Resources
	addr := x.xds
	x.stop()
	x2 := startXdsdAt(t, path, addr)
	x2.apply(t, clusterDoc("b", "2"))
	eb.await(client.Updated, "b", `"2"`)
	if got := c.Stats().Resources - received; got != 1 {
		t.Errorf("after the restart %d resources were downloaded again; want 1 (only b changed)", got)
	}
	// Whatever the server sent before is delivered before a barrier's
	// answer: then nothing more can come for a.
	barrier(t, x2, c)
	select {
	case ev := <-ea.ch:
		t.Errorf("watcher of the unchanged resource was told %s", show(ev))
	default:
	}
}

// A resource the client rejects is NACKed; the NACK is visible in the
// server's /v1/clients.
func TestClientNackVisibleOnServer(t *testing.T) {
	x := startXdsd(t)
	x.apply(t, clusterDoc("c", "ok"))
	c := newXdsClient(t, bootstrap(x.xds, nil, nil), client.Options{Validate: func(_ *resource.Variant, m proto.Message) error {
		if cl, ok := m.(*clusterv3.Cluster); ok && cl.AltStatName == "poison" {
			return errors.New("poisoned cluster")
		}
		return nil
	}})
	ev := newEvents(t)
	c.Watch(t.Context(), resource.ClusterURL, "c", ev.handle)
	ev.await(client.Updated, "c", "ok")
	x.apply(t, clusterDoc("c", "poison"))
	ev.await(client.Errored, "c", "poisoned cluster")
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The NACK travels to the server after the event; poll its admin
		// API, paced by the requests themselves.
		for _, cl := range x.clients(t) {
			for _, ty := range cl["types"].([]any) {
				if n, ok := ty.(map[string]any)["last_nack"].(map[string]any); ok && strings.Contains(fmt.Sprint(n["error"]), "poisoned cluster") {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("NACK never visible: %v", x.clients(t))
		}
	}
}

// Glob membership changes reach a client watching the glob.
func TestClientGlob(t *testing.T) {
	x := startXdsd(t)
	m := func(id string) string { return "xdstp://g/envoy.config.cluster.v3.Cluster/pool/" + id }
	x.apply(t, clusterDoc(m("one"), "1"))
	c := newXdsClient(t, bootstrap(x.xds, map[string]string{"g": ""}, nil), client.Options{})
	ev := newEvents(t)
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "xdstp://g/envoy.config.cluster.v3.Cluster/pool/*", ev.handle); err != nil {
		t.Fatal(err)
	}
	ev.await(client.Updated, m("one"), `"1"`)
	x.apply(t, clusterDoc(m("two"), "2"))
	ev.await(client.Updated, m("two"), `"2"`)
	resp, err := httpDelete("http://" + x.admin + "/v1/resources?type=cds&name=" + m("one"))
	if err != nil || resp != 200 {
		t.Fatalf("delete: %d %v", resp, err)
	}
	ev.await(client.Removed, m("one"), "")
}

// Federation across two `xdsd serve` processes: each name is fetched from
// its authority's server.
func TestClientFederation(t *testing.T) {
	one, two := startXdsd(t), startXdsd(t)
	n1, n2 := "xdstp://one/envoy.config.cluster.v3.Cluster/x", "xdstp://two/envoy.config.cluster.v3.Cluster/x"
	one.apply(t, clusterDoc(n1, "from-one"))
	two.apply(t, clusterDoc(n2, "from-two"))
	c := newXdsClient(t, bootstrap("127.0.0.1:1", map[string]string{"one": one.xds, "two": two.xds}, nil), client.Options{})
	e1, e2 := newEvents(t), newEvents(t)
	c.Watch(t.Context(), resource.ClusterURL, n1, e1.handle)
	c.Watch(t.Context(), resource.ClusterURL, n2, e2.handle)
	e1.await(client.Updated, n1, "from-one")
	e2.await(client.Updated, n2, "from-two")
}

// #alt=: while the primary authority's server is down, the alt is served;
// when it comes up, the client returns to it.
func TestClientAltFailover(t *testing.T) {
	onprem := startXdsd(t)
	alt := "xdstp://onprem/envoy.config.cluster.v3.Cluster/svc"
	onprem.apply(t, clusterDoc(alt, "on-prem"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cloudAddr := l.Addr().String()
	l.Close()
	c := newXdsClient(t, bootstrap(onprem.xds, map[string]string{"cloud": cloudAddr, "onprem": onprem.xds}, nil), client.Options{AltTimeout: 300 * time.Millisecond})
	primary := "xdstp://cloud/envoy.config.cluster.v3.Cluster/svc"
	ev := newEvents(t)
	if _, err := c.Watch(t.Context(), resource.ClusterURL, primary+"#alt="+alt, ev.handle); err != nil {
		t.Fatal(err)
	}
	if e := ev.await(client.Updated, primary, "on-prem"); len(e.Via) != 1 {
		t.Errorf("via %v", e.Via)
	}
	cloud := startXdsdAt(t, filepath.Join(t.TempDir(), "cloud.db"), cloudAddr)
	cloud.apply(t, clusterDoc(primary, "cloud"))
	if e := ev.await(client.Updated, primary, "cloud"); len(e.Via) != 0 {
		t.Errorf("back on the primary, via %v", e.Via)
	}
}

// TP2's four-variant table read back through `xdsd get --param`, for all
// nine env × version combinations and a client sending neither: each gets
// exactly the variant the spec says.
func TestGetFourVariantTable(t *testing.T) {
	x := startXdsd(t, "--watch", "../examples/tp2-variants")
	want := func(env, version string) string {
		switch {
		case env == "prod" && version == "v1":
			return "env=prod && version=v1"
		case env == "prod":
			return "env=prod && version!=v1"
		case version == "v1":
			return "env!=prod && version=v1"
		}
		return "env!=prod && version!=v1"
	}
	type row struct{ env, version string }
	rows := []row{{"", ""}}
	for _, env := range []string{"prod", "canary", "test"} {
		for _, version := range []string{"v1", "v2", "v3"} {
			rows = append(rows, row{env, version})
		}
	}
	for _, r := range rows {
		args := []string{"get", "--server", x.xds, "-o", "json"}
		if r.env != "" {
			args = append(args, "--param", "env="+r.env, "--param", "version="+r.version)
		}
		code, out, errOut := runXdsd(t, append(args, "rds", "tp2")...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", r, code, out, errOut)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != 1 {
			t.Fatalf("%v: output %s (%v)", r, out, err)
		}
		if got[0]["constraints"] != want(r.env, r.version) {
			t.Errorf("env=%q version=%q got [%v], want [%s]", r.env, r.version, got[0]["constraints"], want(r.env, r.version))
		}
	}
	// And in YAML, the default.
	code, out, _ := runXdsd(t, "get", "--server", x.xds, "--param", "env=prod", "--param", "version=v1", "rds", "tp2")
	var y map[string]any
	if code != 0 || yaml.Unmarshal([]byte(strings.TrimPrefix(out, "---\n")), &y) != nil || y["constraints"] != "env=prod && version=v1" {
		t.Errorf("yaml: exit %d\n%s", code, out)
	}
}
