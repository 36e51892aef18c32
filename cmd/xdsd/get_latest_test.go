package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/resource"
)

const routeType = "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n"

// getAcked reports whether a `get` stream has acknowledged a response of
// a type (so it has the resource that response carried).
func getAcked(adm string, typ *resource.Type) (bool, error) {
	resp, err := http.Get("http://" + adm + "/v1/clients")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var cs []protocol.StreamStatus
	if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil {
		return false, err
	}
	for _, c := range cs {
		for _, ts := range c.Types {
			if c.NodeID == "xdsd-get" && ts.Type == typ.Name && ts.AckedNonce != "" {
				return true, nil
			}
		}
	}
	return false, nil
}

// get prints each name once, in its latest state when every name has been
// answered: a resource that changed while another name was still pending
// is printed once, as it is now.
func TestGetPrintsEachNameOnceInItsLatestState(t *testing.T) {
	xds, adm := startServe(t)
	if code, err := httpPost("http://"+adm+"/v1/apply", routeType+"name: a\nvirtual_hosts: [{name: one, domains: [\"*\"]}]\n"); err != nil || code != 200 {
		t.Fatal(code, err)
	}
	changed := make(chan error, 1)
	go func() {
		// Once get has a, and while it waits on "nope", a changes.
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(testutil.Wait)
		for {
			acked, err := getAcked(adm, resource.ForURL(resource.RouteURL))
			if err != nil || acked {
				if err != nil {
					changed <- err
					return
				}
				break
			}
			select {
			case <-tick.C:
			case <-deadline:
				changed <- errors.New("get never acknowledged a")
				return
			}
		}
		_, err := httpPost("http://"+adm+"/v1/apply", routeType+"name: a\nvirtual_hosts: [{name: two, domains: [\"*\"]}]\n")
		changed <- err
	}()
	code, out, errOut := runCmd(t, "get", "--server", xds, "--timeout", "1500ms", "rds", "a", "nope")
	if err := <-changed; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "---\nname: a\n"); n != 1 {
		t.Errorf("a printed %d times:\n%s", n, out)
	}
	if !strings.Contains(out, "name: two") || strings.Contains(out, "name: one") {
		t.Errorf("a not in its latest state:\n%s", out)
	}
	if n := strings.Count(out, "name: nope\n"); n != 1 || code != 1 {
		t.Errorf("exit %d (want 1: nope does not exist), nope printed %d times:\n%s%s", code, n, out, errOut)
	}
}

// scriptedCDS is a delta ADS server sending a script of CDS responses in
// order, one per request it receives (the first request, then each ACK or
// NACK), each once the client has subscribed to every name it holds (a
// server sends only what is subscribed; the client may subscribe its names
// in one request or several).
type scriptedCDS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	script []*discoveryv3.DeltaDiscoveryResponse

	mu  sync.Mutex
	got []string // the requests received, for a failure's message
}

func (s *scriptedCDS) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	subscribed := map[string]bool{}
	next, credit := 0, 0
	for {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.got = append(s.got, fmt.Sprintf("+%v -%v nonce=%q error=%v", req.ResourceNamesSubscribe, req.ResourceNamesUnsubscribe, req.ResponseNonce, req.ErrorDetail.GetMessage()))
		s.mu.Unlock()
		for _, n := range req.ResourceNamesSubscribe {
			subscribed[n] = true
		}
		for _, n := range req.ResourceNamesUnsubscribe {
			delete(subscribed, n)
		}
		credit++
		ready := func(r *discoveryv3.DeltaDiscoveryResponse) bool {
			for _, res := range r.Resources {
				if !subscribed[res.Name] {
					return false
				}
			}
			return true
		}
		for ; next < len(s.script) && credit > 0 && ready(s.script[next]); next++ {
			if err := st.Send(s.script[next]); err != nil {
				return err
			}
			credit--
		}
	}
}

func deltaCluster(t *testing.T, n, payloadName, version string) *discoveryv3.Resource {
	t.Helper()
	a, err := anypb.New(&clusterv3.Cluster{Name: payloadName})
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.Resource{Name: n, Version: version, Resource: a}
}

// A resource rejected at first and accepted later, while get still waits
// on another name, ends well: get prints it once, as accepted, and exits
// 0 — only an error that is the last word makes it fail.
func TestGetTransientErrorDoesNotFail(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv := &scriptedCDS{script: []*discoveryv3.DeltaDiscoveryResponse{
		// a is rejected (its payload names another cluster)...
		{TypeUrl: resource.ClusterURL, Nonce: "1", Resources: []*discoveryv3.Resource{deltaCluster(t, "a", "not-a", "1")}},
		// ... then accepted; then b comes.
		{TypeUrl: resource.ClusterURL, Nonce: "2", Resources: []*discoveryv3.Resource{deltaCluster(t, "a", "a", "2")}},
		{TypeUrl: resource.ClusterURL, Nonce: "3", Resources: []*discoveryv3.Resource{deltaCluster(t, "b", "b", "1")}},
	}}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, srv)
	go g.Serve(l)
	t.Cleanup(g.Stop)
	code, out, errOut := runCmd(t, "get", "--server", l.Addr().String(), "--delta", "--timeout", "5s", "cds", "a", "b")
	if code != 0 {
		srv.mu.Lock()
		t.Errorf("exit %d, want 0: %s\n%s\nrequests:\n%s", code, errOut, out, strings.Join(srv.got, "\n"))
		srv.mu.Unlock()
	}
	if n := strings.Count(out, "---\n"); n != 2 || strings.Contains(out, "error:") || !strings.Contains(out, "version: \"2\"") {
		t.Errorf("want a (version 2) and b, once each, no error:\n%s", out)
	}
}

// --timeout must be positive: 0 or less is bad usage (exit 2), said so.
func TestGetTimeoutMustBePositive(t *testing.T) {
	for _, tm := range []string{"0", "-1s"} {
		code, _, errOut := runCmd(t, "get", "--server", "127.0.0.1:1", "--timeout", tm, "cds", "a")
		if code != 2 || !strings.Contains(errOut, "--timeout") {
			t.Errorf("--timeout %s: exit %d, want 2; stderr: %s", tm, code, errOut)
		}
	}
}
