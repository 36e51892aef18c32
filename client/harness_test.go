package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/protocol"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
	"github.com/xdsd/xdsd/store"
	"github.com/xdsd/xdsd/store/bolt"
)

const wait = 10 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// origin is a real xdsd server (bolt store, db, protocol, gRPC) on
// loopback. It can be stopped and started again on the same address with
// the same store, as a restarted server.
type origin struct {
	t      *testing.T
	path   string
	addr   string
	st     store.Store
	srv    *server.Server
	g      *grpc.Server
	cancel context.CancelFunc
	done   chan struct{}
}

func startOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{t: t, path: filepath.Join(t.TempDir(), "xdsd.db"), addr: "127.0.0.1:0"}
	o.start()
	t.Cleanup(o.stop)
	return o
}

func (o *origin) start() {
	o.t.Helper()
	st, err := bolt.Open(o.path, bolt.Options{})
	if err != nil {
		o.t.Fatal(err)
	}
	lis, err := net.Listen("tcp", o.addr)
	if err != nil {
		o.t.Fatal(err)
	}
	o.addr = lis.Addr().String()
	o.st = st
	o.srv = server.New(st, server.Options{Logger: quiet})
	o.g = grpc.NewServer(protocol.ServerCodec())
	o.srv.Register(o.g)
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel, o.done = cancel, make(chan struct{})
	go func() { o.srv.Run(ctx); close(o.done) }()
	go o.g.Serve(lis)
	if err := o.srv.WaitRev(ctx, st.Rev()); err != nil {
		o.t.Fatal(err)
	}
}

func (o *origin) stop() {
	if o.g == nil {
		return
	}
	o.g.Stop()
	o.cancel()
	<-o.done
	o.st.Close()
	o.g = nil
}

func (o *origin) apply(yaml string) {
	o.t.Helper()
	docs, err := resource.Decode("test", []byte(yaml))
	if err != nil {
		o.t.Fatal(err)
	}
	var b store.Batch
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
	}
	o.commit(b)
}

// commit applies a batch and waits until the server serves it.
func (o *origin) commit(b store.Batch) {
	o.t.Helper()
	res, err := o.st.Apply(context.Background(), b)
	if err != nil {
		o.t.Fatal(err)
	}
	if o.srv == nil || o.g == nil {
		return // offline
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := o.srv.WaitRev(ctx, res.Rev); err != nil {
		o.t.Fatal(err)
	}
}

func (o *origin) remove(typ, name string) {
	o.t.Helper()
	t, _ := resource.Lookup(typ)
	o.commit(store.Batch{Deletes: []store.Delete{{Type: t.URL, Name: name, All: true}}})
}

// subscriptions counts the server's subscriptions to name on all streams.
func (o *origin) subscriptions(name string) int {
	n := 0
	for _, c := range o.srv.Clients() {
		for _, ty := range c.Types {
			for _, s := range ty.Subscriptions {
				if s.Name == name {
					n++
				}
			}
		}
	}
	return n
}

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
func barrier(t *testing.T, c *client.Client, o *origin) {
	t.Helper()
	barriers++
	n := fmt.Sprintf("barrier-%d", barriers)
	o.apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\nname: %s\n", n))
	r := newRecorder(t)
	cancel, err := c.Watch(resource.SecretURL, n, r.handle)
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
