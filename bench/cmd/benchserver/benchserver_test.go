package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/resource"
)

const testClusters = 10

func startImpl(t *testing.T, o options) *instance {
	t.Helper()
	inst, err := start(o)
	if err != nil {
		t.Fatalf("start %s: %v", o.impl, err)
	}
	t.Cleanup(inst.stop)
	return inst
}

// post sends a control request and decodes the answer into out (if set).
func call(t *testing.T, h http.Handler, method, path string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if out != nil && rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v (%s)", method, path, err, rec.Body)
		}
	}
	return rec.Code
}

func mustCall(t *testing.T, h http.Handler, method, path string, body, out any) {
	t.Helper()
	if code := call(t, h, method, path, body, out); code != http.StatusOK {
		t.Fatalf("%s %s: status %d", method, path, code)
	}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(control.ClusterFormat, i)
	}
	return out
}

func dial(t *testing.T, addr string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
}

// decode returns the clusters of a response's resources by name.
func decode(t *testing.T, anys []*anypb.Any) map[string]*clusterv3.Cluster {
	t.Helper()
	out := map[string]*clusterv3.Cluster{}
	for _, a := range anys {
		if a.GetTypeUrl() != resource.ClusterURL {
			t.Fatalf("resource of type %s", a.GetTypeUrl())
		}
		c := new(clusterv3.Cluster)
		if err := a.UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		out[c.GetName()] = c
	}
	return out
}

func checkInitial(t *testing.T, got map[string]*clusterv3.Cluster, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d clusters, want %d", len(got), len(want))
	}
	for _, n := range want {
		c, ok := got[n]
		if !ok {
			t.Fatalf("cluster %s missing", n)
		}
		if c.GetAltStatName() != "initial" || c.GetType() != clusterv3.Cluster_EDS ||
			c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil ||
			len(c.GetMetadata().GetFilterMetadata()["bench"].GetFields()["pad"].GetStringValue()) != 200 {
			t.Fatalf("cluster %s is %v", n, c)
		}
	}
}

func checkMarked(t *testing.T, got map[string]*clusterv3.Cluster, round int) {
	t.Helper()
	marker := fmt.Sprintf(control.MarkerFormat, round)
	if c := got["c-0"]; c.GetAltStatName() != marker {
		t.Fatalf("c-0 after the change: %v, want alt_stat_name %q", c, marker)
	}
	for n, c := range got {
		if n != "c-0" && c.GetAltStatName() != "initial" {
			t.Fatalf("%s changed too: %v", n, c)
		}
	}
}

// sotw subscribes to want over SotW ADS, checks and ACKs the first
// response, and returns a function that receives the next one.
func sotw(t *testing.T, ctx context.Context, addr string, want []string) func() map[string]*clusterv3.Cluster {
	t.Helper()
	st, err := dial(t, addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "loadgen-0"}
	if err := st.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterURL, ResourceNames: want}); err != nil {
		t.Fatal(err)
	}
	recv := func() map[string]*clusterv3.Cluster {
		t.Helper()
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("SotW recv: %v", err)
		}
		if resp.GetTypeUrl() != resource.ClusterURL || resp.GetVersionInfo() == "" || resp.GetNonce() == "" {
			t.Fatalf("SotW response %v", resp)
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: want,
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		return decode(t, resp.GetResources())
	}
	// A relay may answer in parts while its cache fills.
	have := map[string]*clusterv3.Cluster{}
	for len(have) < len(want) {
		maps.Copy(have, recv())
	}
	checkInitial(t, have, want)
	return recv
}

// delta is sotw over delta ADS.
func delta(t *testing.T, ctx context.Context, addr string, want []string) func() map[string]*clusterv3.Cluster {
	t.Helper()
	st, err := dial(t, addr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "loadgen-1"}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: want}); err != nil {
		t.Fatal(err)
	}
	recv := func() map[string]*clusterv3.Cluster {
		t.Helper()
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("delta recv: %v", err)
		}
		if resp.GetTypeUrl() != resource.ClusterURL || resp.GetNonce() == "" {
			t.Fatalf("delta response %v", resp)
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		anys := make([]*anypb.Any, len(resp.GetResources()))
		for i, r := range resp.GetResources() {
			anys[i] = r.GetResource()
			if r.GetName() == "" || r.GetVersion() == "" {
				t.Fatalf("delta resource without name or version: %v", r)
			}
		}
		return decode(t, anys)
	}
	// A relay may answer in parts while its cache fills.
	have := map[string]*clusterv3.Cluster{}
	for len(have) < len(want) {
		maps.Copy(have, recv())
	}
	checkInitial(t, have, want)
	return recv
}

func checkStats(t *testing.T, s control.ServerStats, streams int) {
	t.Helper()
	if s.PID != os.Getpid() || s.RSSBytes < 1<<20 || s.HeapBytes <= 0 || s.Goroutines <= 0 ||
		s.CPUNanos <= 0 || s.Streams != streams || s.EncodedLen < 200 || s.EncodedLen > 400 {
		t.Fatalf("stats %+v, want %d streams", s, streams)
	}
}

func TestImpls(t *testing.T) {
	for _, name := range []string{"xdsd", "gcp-snapshot", "gcp-linear", "raw"} {
		t.Run(name, func(t *testing.T) {
			inst := startImpl(t, options{impl: name})
			h := inst.handler
			if code := call(t, h, "POST", "/change", control.Change{Round: 1, Count: 1}, nil); code != http.StatusConflict {
				t.Fatalf("change before setup: status %d", code)
			}
			var st control.ServerStats
			mustCall(t, h, "POST", "/setup", control.Setup{Clusters: testClusters}, &st)
			checkStats(t, st, 0)

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			want := names(testClusters)
			nextSotW := sotw(t, ctx, inst.xdsAddr, want)
			nextDelta := delta(t, ctx, inst.xdsAddr, want)

			mustCall(t, h, "GET", "/stats", nil, &st)
			checkStats(t, st, 2)

			mustCall(t, h, "POST", "/change", control.Change{Round: 1, Count: 1}, nil)
			got := nextSotW()
			if len(got) != testClusters {
				t.Fatalf("SotW after the change: %d clusters, want %d", len(got), testClusters)
			}
			checkMarked(t, got, 1)
			got = nextDelta()
			if _, ok := got["c-0"]; !ok {
				t.Fatalf("delta after the change lacks c-0: %v", got)
			}
			checkMarked(t, got, 1)

			mustCall(t, h, "POST", "/gc", nil, &st)
			checkStats(t, st, 2)

			if name != "xdsd" {
				if code := call(t, h, "POST", "/setup", control.Setup{Clusters: 2, Variants: 2}, nil); code != http.StatusNotImplemented {
					t.Fatalf("setup with variants: status %d, want 501", code)
				}
			}
		})
	}
}

// TestXdsdOnly covers what only xdsd does: glob collections and variants.
func TestXdsdOnly(t *testing.T) {
	inst := startImpl(t, options{impl: "xdsd"})
	mustCall(t, inst.handler, "POST", "/setup", control.Setup{Clusters: 3, Glob: true}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := dial(t, inst.xdsAddr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "loadgen-0"}, TypeUrl: resource.ClusterURL,
		ResourceNamesSubscribe: []string{control.GlobURL}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		resp, err := st.Recv()
		if err != nil {
			t.Fatalf("glob: %v (have %v)", err, got)
		}
		for _, r := range resp.GetResources() {
			got = append(got, r.GetName())
		}
		st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: resp.GetNonce()})
	}
	slices.Sort(got)
	if want := []string{fmt.Sprintf(control.GlobMemberFormat, 0), fmt.Sprintf(control.GlobMemberFormat, 1), fmt.Sprintf(control.GlobMemberFormat, 2)}; !slices.Equal(got, want) {
		t.Fatalf("glob members %v, want %v", got, want)
	}

	// Variants: a client with v=1 gets variant 1, and then its change.
	mustCall(t, inst.handler, "POST", "/setup", control.Setup{Clusters: 2, Variants: 3}, nil)
	mustCall(t, inst.handler, "POST", "/change", control.Change{Round: 4, Count: 1}, nil)
	ds, err := dial(t, inst.xdsAddr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL,
		Node: &corev3.Node{Id: "loadgen-0"},
		ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{
			{Name: "c-0", DynamicParameters: map[string]string{"v": "1"}},
			{Name: "c-1", DynamicParameters: map[string]string{"v": "1"}},
		}}); err != nil {
		t.Fatal(err)
	}
	alts := map[string]string{}
	for len(alts) < 2 {
		resp, err := ds.Recv()
		if err != nil {
			t.Fatalf("variants: %v (have %v)", err, alts)
		}
		for _, r := range resp.GetResources() {
			c := new(clusterv3.Cluster)
			if err := r.GetResource().UnmarshalTo(c); err != nil {
				t.Fatal(err)
			}
			alts[c.GetName()] = c.GetAltStatName()
		}
		ds.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: resp.GetNonce()})
	}
	if alts["c-0"] != "round-4-mark-v1" || alts["c-1"] != "initial-v1" {
		t.Fatalf("variants for v=1: %v", alts)
	}
}

func TestRelay(t *testing.T) {
	up := startImpl(t, options{impl: "xdsd"})
	mustCall(t, up.handler, "POST", "/setup", control.Setup{Clusters: testClusters}, nil)
	if _, err := start(options{impl: "relay"}); err == nil {
		t.Fatal("relay without --upstream started")
	}
	rl := startImpl(t, options{impl: "relay", upstream: up.xdsAddr})
	if code := call(t, rl.handler, "POST", "/setup", control.Setup{Clusters: 1}, nil); code != http.StatusNotImplemented {
		t.Fatalf("relay setup: status %d, want 501", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := names(testClusters)
	nextSotW := sotw(t, ctx, rl.xdsAddr, want)
	nextDelta := delta(t, ctx, rl.xdsAddr, want)

	var st control.ServerStats
	mustCall(t, rl.handler, "GET", "/stats", nil, &st)
	if st.Streams != 2 || st.EncodedLen != 0 {
		t.Fatalf("relay stats %+v", st)
	}

	mustCall(t, up.handler, "POST", "/change", control.Change{Round: 1, Count: 1}, nil)
	checkMarked(t, nextSotW(), 1)
	checkMarked(t, nextDelta(), 1)
}
