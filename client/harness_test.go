package client_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

const wait = 10 * time.Second

var quiet = testorigin.Quiet

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

// none checks that no event came. It takes the proof that whatever could
// have come has had its chance: a barrier through each server that could
// have sent it (or drained, once the test has seen the client answer).
func (r *recorder) none(_ settled, _ ...settled) {
	r.t.Helper()
	select {
	case e := <-r.ch:
		r.t.Fatalf("unexpected event %s", describe(e))
	default:
	}
}

// settled is the proof none asks for; only barrier, barrierIn and drained
// make one.
type settled struct{}

func cluster(name, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: %q\nalt_stat_name: %q\n", name, tag)
}

var barriers int

// barrier proves the server of the client's top-level servers has
// processed every request the client sent before it, and the client every
// response sent before its answer: the client sends requests in order and
// the server handles them in order, the server sends responses in order
// and the client applies them and calls handlers in order, so once a new
// resource watched now arrives, everything earlier has been handled — and
// delivered. What the client was handed before (a cancel's end, say) is
// done first.
func barrier(t *testing.T, c *client.Client, o *testorigin.Origin) settled {
	t.Helper()
	return barrierIn(t, c, o, "")
}

// barrierIn is barrier through an authority's server.
func barrierIn(t *testing.T, c *client.Client, o *testorigin.Origin, authority string) settled {
	t.Helper()
	client.Settle(c)
	barriers++
	n := fmt.Sprintf("barrier-%d", barriers)
	if authority != "" {
		n = fmt.Sprintf("xdstp://%s/envoy.extensions.transport_sockets.tls.v3.Secret/%s", authority, n)
	}
	o.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: %q\n", n))
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.SecretURL, n, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	r.expect(client.Updated, n, "")
	<-cancel()
	return settled{}
}

// drained is the proof that the client has delivered what it had, once the
// test has seen it answer the server (a scripted server's request).
func drained(c *client.Client) settled {
	client.Settle(c)
	return settled{}
}

// indent nests a YAML document under a wrapper's resource key.
func indent(doc string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}

const lis = "xdstp://a/envoy.config.listener.v3.Listener/"

func listener(id, tag string) string {
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\nstat_prefix: %q\n", lis+id, tag)
}

// listenerCollection is a ListenerCollection document named name whose
// entries are locators "authority/id" of listeners.
func listenerCollection(name string, locators ...string) string {
	doc := "name: " + name + "\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n"
	for _, l := range locators {
		auth, id, _ := strings.Cut(l, "/")
		doc += fmt.Sprintf("  - locator: {authority: %s, resource_type: envoy.config.listener.v3.Listener, id: %s}\n", auth, id)
	}
	return doc
}

func lisRedirect(from, to string) string {
	return fmt.Sprintf("type: lds\nname: %s\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: a\n  resource_type: envoy.config.listener.v3.Listener\n  id: %s\n", lis+from, to)
}

// byName waits for one event for each name, in any order.
func (r *recorder) byName(names ...string) map[string]client.Event {
	r.t.Helper()
	got := map[string]client.Event{}
	for len(got) < len(names) {
		e := r.next()
		if _, ok := got[e.Name]; ok || !slices.Contains(names, e.Name) {
			r.t.Fatalf("unexpected event %s", describe(e))
		}
		got[e.Name] = e
	}
	return got
}

// noSubs checks, once the server has handled what the client sent, that
// it holds no subscription to the names.
func noSubs(t *testing.T, c *client.Client, o *testorigin.Origin, names ...string) {
	t.Helper()
	barrier(t, c, o)
	for _, n := range names {
		if s := o.Subscriptions(n); s != 0 {
			t.Errorf("%s: %d subscriptions left", n, s)
		}
	}
}

const lcoll = "xdstp://a/envoy.config.listener.v3.ListenerCollection/all"

func listColl(entries string) string {
	return fmt.Sprintf("name: %s\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n%s---\n", lcoll, entries)
}

func inlineEntry(name, version, tag string) string {
	return fmt.Sprintf("  - inline_entry:\n      name: %s\n      version: %q\n      resource: {\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener, name: %s, stat_prefix: %s}\n", name, version, name, tag)
}

func locatorEntry(id string) string {
	return fmt.Sprintf("  - locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: %s}\n", id)
}

var transports = []struct {
	name string
	sotw bool
}{{"delta", false}, {"sotw", true}}

// routeDoc is a route configuration document named name, told apart by
// its virtual host's name, with the given constraints ("" for none).
func routeDoc(name, marker, cons string) string {
	doc := "name: " + name + "\n"
	if cons != "" {
		doc += "constraints: \"" + cons + "\"\n"
	}
	return doc + "resource:\n  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  name: " + name +
		"\n  virtual_hosts:\n  - name: " + marker + "\n    domains: [\"*\"]\n"
}

func mustAny(t *testing.T, m *clusterv3.Cluster) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// upstreamDown reports whether the client's one upstream has no healthy
// stream.
func upstreamDown(c *client.Client) func() bool {
	return func() bool {
		u := c.Upstreams()
		return len(u) == 1 && u[0].Connected == ""
	}
}

// cached reports whether the client's cache holds a variant of a resource.
func cached(c *client.Client, typeURL, name string) bool {
	var ok bool
	client.CacheOf(c).Read(func(r *db.Reader) { ok = len(r.Variants(typeURL, name)) > 0 })
	return ok
}
