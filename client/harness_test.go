package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

const wait = 10 * time.Second

var quiet = servertest.Quiet

// bootstrapJSON builds a bootstrap: the default servers, authorities (name →
// server addresses; none: the default), transport, dynamic parameters.
type bs struct {
	servers     []string
	authorities map[string][]string
	sotw        bool
	params      map[string]string
	authParams  map[string]map[string]string
	meta        map[string]string
}

func (b bs) build(t *testing.T) *client.Bootstrap {
	t.Helper()
	mk := func(addrs []string) []map[string]any {
		var out []map[string]any
		for _, a := range addrs {
			s := map[string]any{"server_uri": a, "channel_creds": []map[string]any{{"type": "insecure"}}}
			if b.sotw {
				s["transport"] = "sotw"
			}
			out = append(out, s)
		}
		return out
	}
	auths := map[string]any{}
	for n, addrs := range b.authorities {
		a := map[string]any{}
		if len(addrs) > 0 {
			a["xds_servers"] = mk(addrs)
		}
		if p := b.authParams[n]; p != nil {
			a["dynamic_parameters"] = p
		}
		auths[n] = a
	}
	doc := map[string]any{"xds_servers": mk(b.servers), "node": map[string]any{"id": "client-test", "metadata": b.meta}, "authorities": auths}
	if b.params != nil {
		doc["dynamic_parameters"] = b.params
	}
	js, _ := json.Marshal(doc)
	boot, err := client.ParseBootstrap(js)
	if err != nil {
		t.Fatal(err)
	}
	return boot
}

func newClient(t *testing.T, b *client.Bootstrap, o client.Options) *client.Client {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = 20 * time.Millisecond
		o.BackoffMax = 200 * time.Millisecond
	}
	c, err := client.New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// recorder collects a watcher's events.
type recorder struct {
	t  *testing.T
	ch chan client.Event
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, ch: make(chan client.Event, 1000)}
}

func (r *recorder) handle(e client.Event) { r.ch <- e }

func (r *recorder) next() client.Event {
	r.t.Helper()
	select {
	case e := <-r.ch:
		return e
	case <-time.After(wait):
		r.t.Fatal("no event")
	}
	return client.Event{}
}

// expect waits for an event and checks it: kind, name, and a substring of
// its resource's payload JSON (or error).
func (r *recorder) expect(kind client.EventKind, name, contains string) client.Event {
	r.t.Helper()
	e := r.next()
	got := describe(e)
	if e.Kind != kind || (name != "" && e.Name != name) || !strings.Contains(got, contains) {
		r.t.Fatalf("event %s, want %v %s containing %q", got, kind, name, contains)
	}
	return e
}

func describe(e client.Event) string {
	s := fmt.Sprintf("%v %s", e.Kind, e.Name)
	if e.Variant != nil {
		s += fmt.Sprintf(" [%s] v%s", e.Variant.Constraints, e.Variant.Version)
		if m, err := e.Variant.Message(); err == nil {
			js, _ := json.Marshal(m)
			s += " " + string(js)
		}
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	if len(e.Via) > 0 {
		s += " via=" + strings.Join(e.Via, ",")
	}
	return s
}

func (r *recorder) none() {
	r.t.Helper()
	select {
	case e := <-r.ch:
		r.t.Fatalf("unexpected event %s", describe(e))
	default:
	}
}

func cluster(name, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: %q\nalt_stat_name: %q\n", name, tag)
}

var barriers int

// barrier proves the server has processed every request the client sent
// before it: the client sends requests in order and the server handles them
// in order, so once a new resource watched now arrives, everything earlier
// has been handled.
func barrier(t *testing.T, c *client.Client, o *servertest.Origin) {
	t.Helper()
	barriers++
	n := fmt.Sprintf("barrier-%d", barriers)
	o.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: %s\n", n))
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.SecretURL, n, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, n, "")
	cancel()
}

// indent nests a YAML document under a wrapper's resource key.
func indent(doc string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}
