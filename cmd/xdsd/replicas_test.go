package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/resource"
)

// resourceVersions is an admin listing as "type name [constraints]" → version.
func resourceVersions(l admin.ResourceList) map[string]string {
	m := map[string]string{}
	for _, r := range l.Resources {
		m[r.Type+" "+r.Name+" ["+r.Constraints+"]"] = r.Version
	}
	return m
}

// waitRevision waits until a replica's admin API lists revision rev.
func waitRevision(t *testing.T, adm string, rev int64) admin.ResourceList {
	t.Helper()
	var l admin.ResourceList
	testutil.Eventually(t, fmt.Sprintf("%s at revision %d", adm, rev), func() bool {
		l = listResources(t, adm, "")
		return l.Revision >= rev
	})
	return l
}

func sameListing(t *testing.T, what string, a, b admin.ResourceList) {
	t.Helper()
	va, vb := resourceVersions(a), resourceVersions(b)
	if a.Revision != b.Revision || len(va) != len(vb) || len(va) == 0 {
		t.Fatalf("%s: revision %d with %d resources against revision %d with %d", what, a.Revision, len(va), b.Revision, len(vb))
	}
	for k, v := range va {
		if vb[k] != v {
			t.Fatalf("%s: %s at version %q against %q", what, k, v, vb[k])
		}
	}
}

// Two serve replicas on one etcd: an apply through either is served by
// both with the same revision and versions (over xDS too); a restarted
// replica comes back with the same; while etcd is down both keep serving,
// /readyz says the store is unreachable and apply fails fast saying so;
// when etcd is back, applies work again and both replicas catch up.
func TestReplicasOnEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("replicas")
	xdsA, admA := startServe(t, "--store", url)
	xdsB, admB, stopB := startStoppableServe(t, "--store", url)
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", "../../examples"); code != 0 {
		t.Fatal(errOut)
	}
	la := listResources(t, admA, "")
	sameListing(t, "replicas after an apply through A", la, waitRevision(t, admB, la.Revision))
	more := writeFile(t, t.TempDir(), "more.yaml", cl+"name: more\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", admB, "-f", more); code != 0 {
		t.Fatal(errOut)
	}
	lb := listResources(t, admB, "")
	la = waitRevision(t, admA, lb.Revision)
	sameListing(t, "replicas after an apply through B", la, lb)

	// Over xDS, both replicas send the same versions.
	getVersions := func(xds string) string {
		code, out, errOut := runCmd(t, "get", "--server", xds, "--delta", "--param", "env=prod", "-o", "json", "cds", "quickstart", "more")
		if code != 0 {
			t.Fatalf("get from %s: %s", xds, errOut)
		}
		return out
	}
	if a, b := getVersions(xdsA), getVersions(xdsB); a != b {
		t.Fatalf("replicas answer differently:\n%s\n%s", a, b)
	}

	stopB()
	xdsB, admB, _ = startStoppableServe(t, "--store", url)
	sameListing(t, "a restarted replica", la, listResources(t, admB, ""))

	c.Members[0].Kill()
	readyz := func(adm string) string {
		_, body := httpGet(t, "http://"+adm+"/readyz")
		return body
	}
	testutil.Eventually(t, "/readyz to report the store unreachable", func() bool {
		return strings.Contains(readyz(admA), "etcd store unreachable") && strings.Contains(readyz(admB), "etcd store unreachable")
	})
	start := time.Now()
	code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", more)
	if code == 0 || !strings.Contains(errOut, "etcd unreachable") {
		t.Fatalf("apply with etcd down: exit %d: %s", code, errOut)
	}
	t.Logf("apply failed in %v: %s", time.Since(start), strings.TrimSpace(errOut))
	sameListing(t, "served while etcd is down", la, listResources(t, admB, ""))
	if a, b := getVersions(xdsA), getVersions(xdsB); a != b {
		t.Fatalf("replicas answer differently while etcd is down:\n%s\n%s", a, b)
	}

	c.Members[0].Restart(t)
	c.Wait(t, c.Endpoints()...)
	testutil.Eventually(t, "/readyz to clear", func() bool { return readyz(admA) == "ok\n" && readyz(admB) == "ok\n" })
	writeFile(t, filepath.Dir(more), "more.yaml", cl+"name: more\nalt_stat_name: changed\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", more); code != 0 {
		t.Fatalf("apply after etcd came back: %s", errOut)
	}
	la = listResources(t, admA, "")
	sameListing(t, "after etcd came back", la, waitRevision(t, admB, la.Revision))
}

// --watch DIR on one replica and apply through another: both take effect,
// and a file removed from the directory deletes only what it defined.
func TestReplicasWatchAndApply(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("watch")
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", cl+"name: a\n")
	writeFile(t, dir, "b.yaml", cl+"name: b\n")
	_, admA := startServe(t, "--store", url, "--watch", dir)
	_, admB := startServe(t, "--store", url)
	other := writeFile(t, t.TempDir(), "other.yaml", cl+"name: applied\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", admB, "-f", other); code != 0 {
		t.Fatal(errOut)
	}
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	names := func(l admin.ResourceList) string {
		var got []string
		for _, r := range l.Resources {
			got = append(got, r.Name)
		}
		return strings.Join(got, " ")
	}
	var l admin.ResourceList
	testutil.Eventually(t, "b.yaml's removal to apply", func() bool {
		l = listResources(t, admB, "")
		return names(l) == "a applied"
	})
	sameListing(t, "replicas", listResources(t, admA, ""), waitRevision(t, admB, listResources(t, admA, "").Revision))
}

// A delta client that moves from one replica to the other, declaring what
// it holds in initial_resource_versions, re-downloads nothing unchanged:
// the replicas' versions are the same. Then it gets exactly what changed.
func TestDeltaClientMovesBetweenReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	url := c.URL("delta")
	xdsA, admA := startServe(t, "--store", url)
	xdsB, _ := startServe(t, "--store", url)
	var doc strings.Builder
	const n = 200
	for i := range n {
		fmt.Fprintf(&doc, "---\n%sname: c%d\n", cl, i)
	}
	file := writeFile(t, t.TempDir(), "many.yaml", doc.String())
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "-f", file); code != 0 {
		t.Fatal(errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := func(addr string) discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := stream(xdsA)
	node := &corev3.Node{Id: "mover"}
	if err := a.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"*"}}); err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for len(held) < n {
		r, err := a.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range r.Resources {
			held[res.Name] = res.Version
		}
		a.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r.Nonce})
	}
	a.CloseSend()

	b := stream(xdsB)
	if err := b.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: []string{"*"}, InitialResourceVersions: held}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Dir(file), "one.yaml", cl+"name: c7\nalt_stat_name: changed\n")
	if code, _, errOut := runCmd(t, "apply", "--admin", admA, "--client", "none", "-f", filepath.Join(filepath.Dir(file), "one.yaml")); code != 0 {
		t.Fatal(errOut)
	}
	// Everything B sends until the change arrives is counted.
	downloaded := 0
	for {
		r, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		downloaded += len(r.Resources)
		done := false
		for _, res := range r.Resources {
			if res.Name == "c7" && res.Version != held["c7"] {
				done = true
			}
		}
		b.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResponseNonce: r.Nonce})
		if done {
			break
		}
	}
	if downloaded != 1 {
		t.Fatalf("the client moving to the other replica downloaded %d resources, want only the changed one", downloaded)
	}
}
