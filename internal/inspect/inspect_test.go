package inspect

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	cl    = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"
	cla   = "\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\n"
	route = "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n"
)

func lookup(t *testing.T, s string) *resource.Type {
	t.Helper()
	typ, err := resource.Lookup(s)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

// start runs a client as get or watch would, against addr.
func start(t *testing.T, cfg Config, typ *resource.Type, names []string, doesNotExist time.Duration) *client.Client {
	t.Helper()
	c, err := StartClient(&cfg, typ, names, doesNotExist, testorigin.Quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// background runs fn until the test ends, then ends its context and waits
// for it, failing the test on its error.
func background(t *testing.T, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := fn(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// Get reports each name once in its latest state: a resource, one the
// server says does not exist (delta), and a glob's members in name order.
func TestGet(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply("name: a\nconstraints: env!=prod\nresource:\n  " + cl + "  alt_stat_name: one\n---\n" +
		"name: a\nconstraints: env=prod\nresource:\n  " + cl + "  alt_stat_name: two\n")
	typ := lookup(t, "cds")
	names := []string{"a", "nope", "a"}
	cfg := Config{Cmd: "get", Server: o.Addr, ServerSet: true, Delta: true, DeltaSet: true, Params: map[string]string{"env": "prod"}}
	c := start(t, cfg, typ, names, -1)
	a, err := Get(c, nil, typ, names, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Results) != 2 || a.Results[0].Name != "a" || !strings.Contains(string(a.Results[0].Resource.Resource), "two") ||
		a.Results[1].Name != "nope" || a.Results[1].Status != StatusDoesNotExist {
		t.Fatalf("results %+v", a.Results)
	}
	if !a.Failed || a.Err() == nil || a.Err().Error() != "not every resource could be had" {
		t.Errorf("failed %v, error %v", a.Failed, a.Err())
	}

	o.Apply(cl + "name: xdstp://x/envoy.config.cluster.v3.Cluster/m2\n---\n" + cl + "name: xdstp://x/envoy.config.cluster.v3.Cluster/m1\n")
	glob := []string{"xdstp://x/envoy.config.cluster.v3.Cluster/*"}
	c = start(t, Config{Cmd: "get", Server: o.Addr, ServerSet: true}, typ, glob, -1)
	a, err = Get(c, nil, typ, glob, 10*time.Second, nil)
	if err != nil || a.Err() != nil {
		t.Fatal(err, a.Err())
	}
	if len(a.Results) != 2 || !strings.HasSuffix(a.Results[0].Name, "/m1") || !strings.HasSuffix(a.Results[1].Name, "/m2") {
		t.Errorf("glob: %+v", a.Results)
	}
}

// A server that refuses connections is reported within about FastFail,
// not at the timeout, naming it; nothing is reported of its names.
func TestGetUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	typ := lookup(t, "cds")
	c := start(t, Config{Cmd: "get", Server: addr, ServerSet: true}, typ, []string{"a"}, -1)
	began := time.Now()
	a, err := Get(c, nil, typ, []string{"a"}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Results) != 0 || a.Err() == nil || !strings.Contains(a.Err().Error(), "cannot reach xDS server "+addr) {
		t.Fatalf("results %+v, error %v", a.Results, a.Err())
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("took %v with a timeout of an hour", d)
	}
}

// A name the client refuses is the operator's mistake: a *NameError.
func TestGetRefusedName(t *testing.T) {
	o := testorigin.Start(t)
	typ := lookup(t, "cds")
	n := "xdstp://a/envoy.config.cluster.v3.Cluster/x?xds.resource.vip=1"
	c := start(t, Config{Cmd: "get", Server: o.Addr, ServerSet: true}, typ, []string{n}, -1)
	_, err := Get(c, nil, typ, []string{n}, 10*time.Second, nil)
	var ne *NameError
	if !errors.As(err, &ne) || ne.Name != n {
		t.Fatalf("error %v, want a NameError naming %s", err, n)
	}
}

// Follow resolves the chain from a route down to endpoints, naming the
// reference that led to each, and reports a dangling reference.
func TestFollow(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(route + "name: r\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: c}}]}]\n---\n" +
		cl + "name: c\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n---\n" +
		cla + "cluster_name: c\n---\n" +
		route + "name: broken\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: nowhere}}]}]\n")
	typ := lookup(t, "rds")
	cfg := Config{Cmd: "get", Server: o.Addr, ServerSet: true, Delta: true, DeltaSet: true}
	c := start(t, cfg, typ, []string{"r"}, FollowDoesNotExist)
	ch, err := Follow(c, typ, []string{"r"}, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ch.Resources {
		got = append(got, r.Name+" <- "+r.From)
	}
	want := "r <- ; c <- route r: virtual_hosts[0].routes[0].route.cluster; c <- cluster c: name"
	if strings.Join(got, "; ") != want || len(ch.Dangling) != 0 {
		t.Errorf("chain %q, want %q; dangling %v", strings.Join(got, "; "), want, ch.Dangling)
	}

	ch, err = Follow(c, typ, []string{"broken"}, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Dangling) != 1 || ch.Dangling[0] != "route broken: virtual_hosts[0].routes[0].route.cluster → cluster nowhere: does-not-exist" {
		t.Errorf("dangling %q", ch.Dangling)
	}
}

// Watch emits every change of a watched resource, stamped, and its
// removal; WatchChain emits the chain again when a part of it changes.
func TestWatch(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(cl + "name: w\nalt_stat_name: one\n")
	typ := lookup(t, "cds")
	cfg := Config{Cmd: "watch", Server: o.Addr, ServerSet: true, Delta: true, DeltaSet: true}
	c := start(t, cfg, typ, []string{"w"}, 5*time.Second)
	events := make(chan Result, 10)
	background(t, func(ctx context.Context) error {
		return Watch(ctx, c, nil, typ, []string{"w"}, func(r Result) { events <- r }, &strings.Builder{})
	})
	next := func() Result {
		t.Helper()
		select {
		case r := <-events:
			return r
		case <-time.After(testorigin.Wait):
			t.Fatal("no event")
		}
		return Result{}
	}
	if r := next(); r.Event != "updated" || r.Time == "" || !strings.Contains(string(r.Resource.Resource), "one") {
		t.Fatalf("first: %+v", r)
	}
	o.Apply(cl + "name: w\nalt_stat_name: two\n")
	if r := next(); r.Event != "updated" || !strings.Contains(string(r.Resource.Resource), "two") {
		t.Fatalf("second: %+v", r)
	}
	o.Remove("cds", "w")
	if r := next(); r.Event != "removed" || r.Status != StatusDoesNotExist {
		t.Fatalf("third: %+v", r)
	}
}

func TestWatchChain(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(route + "name: r\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: c}}]}]\n---\n" +
		cl + "name: c\n---\n" + cl + "name: d\n")
	typ := lookup(t, "rds")
	cfg := Config{Cmd: "watch", Server: o.Addr, ServerSet: true, Delta: true, DeltaSet: true}
	c := start(t, cfg, typ, []string{"r"}, 5*time.Second)
	chains := make(chan Chain, 10)
	background(t, func(ctx context.Context) error {
		return WatchChain(ctx, c, typ, []string{"r"}, func(ch Chain) error { chains <- ch; return nil })
	})
	last := func(want string) {
		t.Helper()
		for {
			select {
			case ch := <-chains:
				if ch.Time == "" {
					t.Errorf("chain without a time: %+v", ch)
				}
				if n := len(ch.Resources); n == 2 && ch.Resources[1].Name == want {
					return
				}
			case <-time.After(testorigin.Wait):
				t.Fatalf("no chain through cluster %s", want)
			}
		}
	}
	last("c")
	o.Apply(route + "name: r\nvirtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: d}}]}]\n")
	last("d")
}

// The bootstrap get and watch build: --param sets the top-level and every
// authority's dynamic parameters, the names' authorities are mapped, and
// --delta sets every server's transport.
func TestBootstrap(t *testing.T) {
	typ := lookup(t, "cds")
	b, err := Bootstrap(&Config{Cmd: "watch", Server: "s:1", ServerSet: true, Delta: true, DeltaSet: true, Params: map[string]string{"env": "prod"}},
		typ, []string{"xdstp://auth/envoy.config.cluster.v3.Cluster/x"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Node.GetId() != "xdsd-watch" || len(b.Servers) != 1 || b.Servers[0].URI != "s:1" || !b.Servers[0].Delta() {
		t.Errorf("node %q, servers %+v", b.Node.GetId(), b.Servers)
	}
	if b.DynamicParameters["env"] != "prod" || b.Authorities["auth"] == nil || b.Authorities["auth"].DynamicParameters["env"] != "prod" {
		t.Errorf("parameters %v, authorities %+v", b.DynamicParameters, b.Authorities)
	}
}
