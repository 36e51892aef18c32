package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/xdsd/xdsd/internal/testutil"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// bigBatch is the size of the large-batch tests: prewritten in several
// etcd requests (chunks of 1 MiB, about 6,000 of these variants each),
// copied in hundreds of transactions (120 operations each) and loaded in
// several pages (5,000 keys each), which is what makes a batch large for
// etcd; less with -short. 100,000 proved nothing more and took 100-150 s
// of the package's time under -race on a busy machine.
func bigBatch() int {
	if testing.Short() {
		return 5000
	}
	return 20000
}

func clusters(n int, prefix, tag string) []*resource.Variant {
	out := make([]*resource.Variant, n)
	for i := range out {
		out[i] = storetest.Cluster(fmt.Sprintf("%s%d", prefix, i), "", tag)
	}
	return out
}

// versions is a store's state as key → version.
func versions(t *testing.T, s store.Store) map[string]string {
	t.Helper()
	cs, err := s.Changes(context.Background(), store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, v := range cs.Puts {
		m[v.Name] = v.Version // the tests use distinct names
	}
	return m
}

// waitRev waits until s holds revision rev: an event (Updated), with a
// deadline generous enough for a replica loading 100,000 variants on a
// loaded machine.
func waitRev(t *testing.T, s store.Store, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		ch := s.Updated()
		if s.Rev() >= rev {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("store at rev %d, want %d", s.Rev(), rev)
		}
	}
}

func sameVersions(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d variants against %d", what, len(a), len(b))
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("%s: %s at version %q against %q", what, k, v, b[k])
		}
	}
}

// A batch larger than any etcd request is prewritten and committed at once:
// a replica following sees it whole in one change set, every replica
// agrees on every version, and one started later loads the same.
func TestLargeBatchReplicasAgree(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	a, b := open(t, c, p), open(t, c, p)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	w := store.Watch(b, store.FromStart)
	if _, err := w.Next(ctx); err != nil {
		t.Fatal(err)
	}
	n := bigBatch()
	r, err := a.Apply(ctx, store.Batch{Puts: clusters(n, "c", "1"), Meta: map[string][]byte{"owner": []byte("big")}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Rev != 1 || len(r.Puts) != n {
		t.Fatalf("result rev %d, %d puts", r.Rev, len(r.Puts))
	}
	cs, err := w.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Rev != 1 || len(cs.Puts) != n || cs.Reset {
		t.Fatalf("follower's change set: rev %d, %d puts, reset %v", cs.Rev, len(cs.Puts), cs.Reset)
	}
	// Small batches on both replicas, some changing part of the big one.
	if _, err := b.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("c7", "", "2"), storetest.Route("r", "env=prod", "1")}}); err != nil {
		t.Fatal(err)
	}
	r, err = a.Apply(ctx, store.Batch{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "c8", All: true}}})
	if err != nil {
		t.Fatal(err)
	}
	waitRev(t, a, r.Rev)
	waitRev(t, b, r.Rev)
	va, vb := versions(t, a), versions(t, b)
	sameVersions(t, "replicas a and b", va, vb)
	if va["c7"] != "2" || va["c9"] != "1" || len(va) != n {
		t.Errorf("versions: c7=%s c9=%s, %d variants", va["c7"], va["c9"], len(va))
	}
	if got, err := b.Meta(ctx, "owner"); err != nil || string(got) != "big" {
		t.Errorf("metadata on the follower: %q %v", got, err)
	}
	late := open(t, c, p)
	if late.Rev() != r.Rev {
		t.Fatalf("a replica started later is at rev %d, want %d", late.Rev(), r.Rev)
	}
	sameVersions(t, "a replica started later", va, versions(t, late))

	// History is the same on every replica, a late one included: the
	// records (when, who, what) and the state at an earlier revision.
	hist := func(s store.Store) string {
		l, err := s.Revisions(ctx, store.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(l)
		return string(j)
	}
	if ha, hb, hl := hist(a), hist(b), hist(late); ha != hb || ha != hl || !strings.Contains(ha, `"total":1`) {
		t.Errorf("histories differ:\n%.300s\n%.300s\n%.300s", ha, hb, hl)
	}
	for _, s := range []store.Store{a, b, late} {
		st, err := s.StateAt(ctx, 1, store.Filter{Name: "c7"})
		if err != nil || len(st) != 1 || st[0].Version != "1" {
			t.Fatalf("state at revision 1: %v %v", st, err)
		}
		st, err = s.StateAt(ctx, 1, store.Filter{})
		if err != nil || len(st) != n {
			t.Fatalf("state at revision 1: %d variants, %v", len(st), err)
		}
	}
}

// Writers on two replicas at once: every batch gets its own revision, in
// one order that both replicas agree on, and none is lost.
func TestConcurrentReplicas(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	reps := []*etcd.Store{open(t, c, p), open(t, c, p)}
	const perWriter, batches = 2, 15
	var wg sync.WaitGroup
	for ri, s := range reps {
		for w := range perWriter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range batches {
					// Every batch also rewrites one shared resource.
					tag := fmt.Sprintf("r%dw%db%d", ri, w, i)
					b := store.Batch{Puts: []*resource.Variant{storetest.Cluster(tag, "", "1"), storetest.Cluster("shared", "", tag)}}
					if _, err := s.Apply(context.Background(), b); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	total := int64(len(reps) * perWriter * batches)
	for _, s := range reps {
		waitRev(t, s, total)
	}
	va, vb := versions(t, reps[0]), versions(t, reps[1])
	sameVersions(t, "replicas", va, vb)
	if len(va) != int(total)+1 {
		t.Fatalf("%d variants, want %d", len(va), total+1)
	}
	seen := map[string]bool{}
	for k, v := range va {
		if k == "shared" {
			continue
		}
		if seen[v] {
			t.Fatalf("two batches share version %s", v)
		}
		seen[v] = true
	}
}

// etcd unreachable: the replica keeps what it holds, an apply fails fast
// saying so, Unreachable reports it; when etcd is back, applies work and
// a replica catches up.
func TestUnreachable(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	mk := func() *etcd.Store {
		s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: p, RequestTimeout: time.Second, ProbeInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := mk(), mk()
	ctx := context.Background()
	if _, err := a.Apply(ctx, store.Batch{Puts: clusters(300, "c", "1")}); err != nil {
		t.Fatal(err)
	}
	waitRev(t, b, 1)
	c.Members[0].Kill()

	start := time.Now()
	_, err := a.Apply(ctx, store.Batch{Puts: clusters(3, "x", "1")})
	if !errors.Is(err, etcd.ErrUnreachable) {
		t.Fatalf("apply with etcd down: %v", err)
	}
	t.Logf("apply failed after %v: %v", time.Since(start), err)
	if a.Unreachable() == "" {
		t.Error("Unreachable is empty after a failed apply")
	}
	testutil.Eventually(t, "the follower to notice", func() bool { return b.Unreachable() != "" })
	if len(versions(t, a)) != 300 || len(versions(t, b)) != 300 || a.Rev() != 1 {
		t.Fatalf("state while etcd is down: rev %d", a.Rev())
	}

	c.Members[0].Restart(t)
	c.Wait(t, c.Endpoints()...)
	testutil.Eventually(t, "the probe to see etcd back", func() bool { return a.Unreachable() == "" && b.Unreachable() == "" })
	r, err := a.Apply(ctx, store.Batch{Puts: clusters(3, "x", "1")})
	if err != nil || r.Rev != 2 {
		t.Fatalf("apply after etcd came back: %+v %v", r, err)
	}
	waitRev(t, b, 2)
	sameVersions(t, "after etcd came back", versions(t, a), versions(t, b))
}

// One member of three killed: applies go on, and nothing acknowledged is
// lost when it returns.
func TestMemberKilled(t *testing.T) {
	c := etcdtest.Start(t, 3)
	p := freshPrefix()
	a := open(t, c, p)
	ctx := context.Background()
	var last int64
	for i := range 10 {
		if i == 3 {
			c.Members[0].Kill()
		}
		if i == 7 {
			c.Members[0].Restart(t)
		}
		r, err := a.Apply(ctx, store.Batch{Puts: clusters(200, "c", strconv.Itoa(i))})
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		last = r.Rev
	}
	if last != 10 {
		t.Fatalf("rev %d after 10 batches", last)
	}
	c.Wait(t, c.Members[0].Client)
	// A replica reading through the member that was down sees it all.
	s, err := etcd.Open(ctx, etcd.Options{Endpoints: []string{c.Members[0].Client}, Prefix: p, RequestTimeout: testRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Rev() != 10 {
		t.Fatalf("replica through the restarted member at rev %d", s.Rev())
	}
	sameVersions(t, "through the restarted member", versions(t, a), versions(t, s))
}

// A replica whose watch resumes at a compacted revision (its member was
// down while the others went on and compacted) reloads the whole state and
// hands its watchers the difference as an ordinary change set, not a
// reset: connected clients keep their streams and what they hold.
func TestCompactedWatchReloads(t *testing.T) {
	c := etcdtest.Start(t, 3)
	p := freshPrefix()
	ctx := context.Background()
	a, err := etcd.Open(ctx, etcd.Options{Endpoints: []string{c.Members[1].Client, c.Members[2].Client}, Prefix: p, RequestTimeout: testRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := etcd.Open(ctx, etcd.Options{Endpoints: []string{c.Members[0].Client}, Prefix: p, RequestTimeout: testRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.Apply(ctx, store.Batch{Puts: clusters(300, "c", "1")}); err != nil {
		t.Fatal(err)
	}
	waitRev(t, b, 1)
	w := store.Watch(b, 1)

	c.Members[0].Kill()
	var last store.Result
	for i := range 5 {
		if last, err = a.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster(fmt.Sprintf("c%d", i), "", "2")}}); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[1].Client}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	gr, err := cl.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Compact(ctx, gr.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	c.Members[0].Restart(t)

	waitRev(t, b, last.Rev)
	sameVersions(t, "after the reload", versions(t, a), versions(t, b))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cs, err := w.Next(cctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Reset || cs.Rev != last.Rev || len(cs.Puts) != 5 || len(cs.Deletes) != 0 {
		t.Fatalf("change set after the reload: rev %d, reset %v, %d puts, %d deletes", cs.Rev, cs.Reset, len(cs.Puts), len(cs.Deletes))
	}
}
