package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/inspect"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

// get --follow resolves the chain a client would, from a listener down to
// endpoints, for the client's TP2 parameters, and names a dangling
// reference.
func TestGetFollow(t *testing.T) {
	xds, adm := startServe(t, "--watch", "../../examples/quickstart")
	code, out, errOut := runCmd(t, "get", "--server", xds, "--follow", "-o", "json", "lds", "quickstart")
	if code != 0 {
		t.Fatalf("get --follow lds quickstart: %d\n%s%s", code, out, errOut)
	}
	var ch inspect.Chain
	if err := json.Unmarshal([]byte(out), &ch); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ch.Resources {
		got = append(got, r.Type+" "+r.Name+" <- "+r.From)
	}
	want := []string{
		"envoy.config.listener.v3.Listener quickstart <- ",
		"envoy.config.route.v3.RouteConfiguration quickstart <- listener quickstart: api_listener.api_listener.rds.route_config_name",
		"envoy.config.cluster.v3.Cluster quickstart <- route quickstart: virtual_hosts[0].routes[0].route.cluster",
		"envoy.config.endpoint.v3.ClusterLoadAssignment quickstart <- cluster quickstart: name",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(ch.Dangling) != 0 {
		t.Errorf("chain:\n%s\nwant\n%s\ndangling %v", strings.Join(got, "\n"), strings.Join(want, "\n"), ch.Dangling)
	}

	// A route naming a cluster that does not exist.
	route := "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: broken\n" +
		"virtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: nowhere}}]}]\n"
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--client", "none", "-f", writeFile(t, t.TempDir(), "r.yaml", route)); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut = runCmd(t, "get", "--server", xds, "--follow", "--timeout", "5s", "rds", "broken")
	if code != 1 || !strings.Contains(errOut, "route broken: virtual_hosts[0].routes[0].route.cluster → cluster nowhere: does-not-exist") ||
		!strings.Contains(out, "dangling:") || !strings.Contains(out, "name: broken") {
		t.Errorf("dangling cluster: %d\n%s%s", code, out, errOut)
	}
}

// The TP2 example: the chain depends on the client's parameters.
func TestGetFollowTP2(t *testing.T) {
	xds, _ := startServe(t, "--watch", "../../examples/tp2-variants")
	for params, cluster := range map[string]string{"env=prod": "tp2-prod", "env=test": "tp2-default"} {
		code, out, errOut := runCmd(t, "get", "--server", xds, "--follow", "--param", params, "--param", "version=v2", "rds", "tp2")
		if code != 0 || !strings.Contains(out, "name: "+cluster+"\n") || !strings.Contains(out, "type: envoy.config.endpoint.v3.ClusterLoadAssignment") {
			t.Errorf("%s: %d\n%s%s", params, code, out, errOut)
		}
	}
}

// watch --follow prints the chain at start, and again when any part of it
// changes: here the route moves to another cluster, whose endpoints join
// the chain.
func TestWatchFollow(t *testing.T) {
	xds, adm := startServe(t, "--watch", "../../examples/quickstart")
	typ, _ := resource.Lookup("lds")
	var out syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watchFollow(ctx, &getFlags{Config: inspect.Config{Cmd: "watch", Server: xds, Timeout: 5 * time.Second}, output: "yaml", follow: true},
			typ, []string{"quickstart"}, &out, io.Discard)
	}()
	testutil.Eventually(t, "the first chain", func() bool {
		return strings.Count(out.String(), "type: envoy.config.endpoint.v3.ClusterLoadAssignment") == 1
	})
	second := cl + "name: second\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\n---\n" +
		"\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: second\n---\n" +
		"\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: quickstart\n" +
		"virtual_hosts: [{name: v, domains: ['*'], routes: [{match: {prefix: ''}, route: {cluster: second}}]}]\n"
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "--force", "-f", writeFile(t, t.TempDir(), "s.yaml", second)); code != 0 {
		t.Fatal(errOut)
	}
	testutil.Eventually(t, "the chain through cluster second", func() bool {
		docs := strings.Split(out.String(), "---\n")
		last := docs[len(docs)-1]
		return strings.Contains(last, "name: second") && strings.Contains(last, "referenced_by: 'route quickstart: virtual_hosts[0].routes[0].route.cluster'") &&
			strings.Contains(last, "referenced_by: 'cluster second: name'") && !strings.Contains(last, "cluster_name: quickstart")
	})
	if n := strings.Count(out.String(), "time: "); n != 2 {
		t.Errorf("printed the chain %d times, want 2 (once at start, once after the change):\n%s", n, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// get --computed adds TP1 computed attributes (xds.resource.*) to the
// name; a configured name carrying them is refused.
func TestGetComputed(t *testing.T) {
	xds, adm := startServe(t)
	const base = "xdstp://a/envoy.config.cluster.v3.Cluster/by-vip?bar=baz"
	docs := cl + "name: \"" + base + "&xds.resource.vip=96.54.3.1\"\nalt_stat_name: vip-1\n---\n" +
		cl + "name: \"" + base + "&xds.resource.vip=96.54.3.2\"\nalt_stat_name: vip-2\n"
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, t.TempDir(), "c.yaml", docs)); code != 0 {
		t.Fatal(errOut)
	}
	code, out, errOut := runCmd(t, "get", "--server", xds, "--computed", "vip=96.54.3.2", "cds", base)
	if code != 0 || !strings.Contains(out, "alt_stat_name: vip-2") || !strings.Contains(out, "xds.resource.vip=96.54.3.2") {
		t.Errorf("get --computed vip=96.54.3.2: %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCmd(t, "get", "--server", xds, "cds", base+"&xds.resource.vip=96.54.3.2"); code == 0 || !strings.Contains(errOut, "reserves for attributes a client computes") {
		t.Errorf("get of a name with xds.resource.vip: %d %s", code, errOut)
	}
}

// Over SotW a server does not say that a route configuration is missing:
// get --follow waits a little for it and then names the missing link,
// well within a short --timeout (it waited the whole timeout and said
// only "1 names unanswered").
func TestGetFollowSotWNamesTheMissingLink(t *testing.T) {
	listener := "\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: dl\napi_listener:\n  api_listener:\n" +
		"    \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n" +
		"    stat_prefix: dl\n    rds: {route_config_name: missing-route, config_source: {ads: {}}}\n" +
		"    http_filters: [{name: router, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]\n"
	dir := t.TempDir()
	writeFile(t, dir, "l.yaml", listener)
	xds, _ := startServe(t, "--watch", dir)
	for _, transport := range []string{"--delta=false", "--delta"} {
		code, out, errOut := runCmd(t, "get", "--server", xds, transport, "--follow", "--timeout", "3s", "lds", "dl")
		if code != 1 || !strings.Contains(errOut, "listener dl: api_listener.api_listener.rds.route_config_name → route missing-route: does-not-exist") ||
			!strings.Contains(out, "name: dl") {
			t.Errorf("%s: exit %d\n%s%s", transport, code, out, errOut)
		}
	}
}

// A server that never answers: get --follow names the name it waited
// for (as a client would, missing once its does-not-exist timer ran out)
// within the timeout, rather than a count of names unanswered.
func TestGetFollowNamesWhatWasUnanswered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, silentADS{})
	go g.Serve(l)
	t.Cleanup(g.Stop)
	code, _, errOut := runCmd(t, "get", "--server", l.Addr().String(), "--follow", "--timeout", "2s", "rds", "r")
	if code != 1 || !strings.Contains(errOut, "route r: does-not-exist") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
}

// silentADS takes requests and never answers.
type silentADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
}

func (silentADS) StreamAggregatedResources(st discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	for {
		if _, err := st.Recv(); err != nil {
			return err
		}
	}
}
