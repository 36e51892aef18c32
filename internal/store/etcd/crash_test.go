package etcd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

const crashEnv = "XDSD_ETCD_CRASH_CHILD"

type crashJob struct {
	Endpoints []string
	Prefix    string
	Round     int
	N         int
	Point     string // prewrite, committed, copying; "" to be killed after the ack
	Nth       int    // die at the Nth time the point is reached
}

func crashBatch(round, n int) store.Batch {
	tag := strconv.Itoa(round)
	b := store.Batch{Puts: clusters(n, "b"+tag+"-", tag), Meta: map[string][]byte{"last": []byte(tag)}}
	b.Puts = append(b.Puts, storetest.Route("shared", "", tag))
	return b
}

// crashChildMain runs the child writer when the test binary is started as
// one, and reports whether it was.
func crashChildMain() bool {
	env := os.Getenv(crashEnv)
	if env == "" {
		return false
	}
	var j crashJob
	if err := json.Unmarshal([]byte(env), &j); err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	// A short lease, so that a killed writer's prewrite expires soon (the
	// test waits for that at its end); long enough that the living
	// writer's keep-alives hold it on a loaded machine.
	s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: j.Endpoints, Prefix: j.Prefix, LeaseTTL: 5 * time.Second, RequestTimeout: testRequestTimeout})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	seen := 0
	etcd.SetCrashHook(func(p string) {
		if p == j.Point {
			if seen++; seen == j.Nth {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}
	})
	r, err := s.Apply(context.Background(), crashBatch(j.Round, j.N))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Printf("ack %d\n", r.Rev)
	select {} // until killed
}

// A writer killed with SIGKILL at several points of a large batch's write
// (while prewrite it, right after its commit, while copying it): a replica
// following throughout, and one started afterwards, see every batch whole
// or not at all; acknowledged batches are there; a batch killed after its
// commit is finished by the next writer; a dead writer's prewritten chunks are
// cleaned up.
func TestWriterKilledMidApply(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	follower := open(t, c, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w := store.Watch(follower, store.FromStart)
	if _, err := w.Next(ctx); err != nil {
		t.Fatal(err)
	}
	n := crashBatchSize()
	rounds := []struct {
		point   string
		nth     int
		present bool
	}{
		{"prewrite", 1, false},
		{"committed", 1, true},
		{"copying", 5, true},
		{"prewrite", 1, false},
		{"", 0, true},
	}
	var applied []int // rounds whose batch is committed
	for round, rd := range rounds {
		job, _ := json.Marshal(crashJob{Endpoints: c.Endpoints(), Prefix: p, Round: round, N: n, Point: rd.point, Nth: rd.nth})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+string(job))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		acked := false
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "ack ") {
				acked = true
				break
			}
			t.Fatalf("round %d: child said %q", round, line)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if acked != (rd.point == "") {
			t.Fatalf("round %d: acknowledged %v", round, acked)
		}
		if rd.point == "committed" {
			// Killed before its copy: every chunk of the batch is still
			// prewritten. It took several etcd requests, or the test would
			// not test a batch larger than one.
			chunks := prewrittenChunks(t, c, p)
			t.Logf("round %d: the batch of %d variants was prewritten in %d chunks", round, n, chunks)
			if chunks < 3 {
				t.Fatalf("round %d: the batch of %d variants was prewritten in %d chunks, want several", round, n, chunks)
			}
		}
		if rd.present {
			applied = append(applied, round)
		}
		// A later writer finishes a committed copy; a fresh replica and
		// the follower agree and hold exactly the committed batches.
		if _, err := follower.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("after"+strconv.Itoa(round), "", "x")}}); err != nil {
			t.Fatal(err)
		}
		fresh := open(t, c, p)
		waitRev(t, follower, fresh.Rev())
		checkCrashState(t, round, fresh, n, applied)
		sameVersions(t, fmt.Sprintf("round %d: follower and fresh replica", round), versions(t, follower), versions(t, fresh))
		fresh.Close()
	}
	// Every change set the follower saw held whole batches.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer wcancel()
	for w.Rev() < follower.Rev() {
		cs, err := w.Next(wctx)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, v := range cs.Puts {
			if strings.HasPrefix(v.Name, "b") {
				r, _, _ := strings.Cut(v.Name[1:], "-")
				count[r]++
			}
		}
		for r, k := range count {
			if k != n {
				t.Errorf("the follower saw %d of batch %s's %d variants in one change set", k, r, n)
			}
		}
	}
	// Abandoned prewrite is gone once its lease expired and a large apply
	// came by.
	cl := c.Client(t)
	testutil.Eventually(t, "the dead writers' leases to expire", func() bool {
		r, err := cl.Get(ctx, p+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false
		}
		for _, kv := range r.Kvs {
			if strings.HasSuffix(string(kv.Key), "/m") {
				return false
			}
		}
		return true
	})
	if _, err := follower.Apply(ctx, store.Batch{Puts: clusters(500, "cleanup", "1")}); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Get(ctx, p+"s/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Fatalf("prewritten keys left after clean-up: %d %v", r.Count, err)
	}
}

// crashBatchSize is the size of the killed writers' batches: large enough to
// be prewritten in several etcd requests (chunks of 1 MiB, about 6,000 of
// these variants each) and copied in hundreds (120 operations each), so
// that each crash point falls inside the write: bigBatch's size (the
// test's 5 rounds and 6 full reloads pay for it several times over).
func crashBatchSize() int {
	if testing.Short() {
		return bigBatch()
	}
	return 20000
}

// prewrittenChunks counts the prewritten chunks under prefix p.
func prewrittenChunks(t *testing.T, c *etcdtest.Cluster, p string) int {
	t.Helper()
	r, err := c.Client(t).Get(context.Background(), p+"s/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, kv := range r.Kvs {
		if strings.Contains(string(kv.Key), "/c/") {
			n++
		}
	}
	return n
}

func checkCrashState(t *testing.T, round int, s store.Store, n int, applied []int) {
	t.Helper()
	cs, err := s.Changes(context.Background(), store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	count, vers := map[string]int{}, map[string]map[string]bool{}
	shared := ""
	for _, v := range cs.Puts {
		if v.Name == "shared" {
			shared = string(v.Body())
			continue
		}
		if !strings.HasPrefix(v.Name, "b") {
			continue
		}
		r, _, _ := strings.Cut(v.Name[1:], "-")
		count[r]++
		if vers[r] == nil {
			vers[r] = map[string]bool{}
		}
		vers[r][v.Version] = true
	}
	want := map[string]bool{}
	for _, r := range applied {
		want[strconv.Itoa(r)] = true
	}
	for r, k := range count {
		if !want[r] || k != n || len(vers[r]) != 1 {
			t.Errorf("round %d: batch %s has %d of %d variants at %d versions (committed: %v)", round, r, k, n, len(vers[r]), want[r])
		}
	}
	for r := range want {
		if count[r] == 0 {
			t.Errorf("round %d: committed batch %s is missing", round, r)
		}
	}
	if len(applied) > 0 {
		last := strconv.Itoa(applied[len(applied)-1])
		if got, err := s.Meta(context.Background(), "last"); err != nil || string(got) != last {
			t.Errorf("round %d: metadata names batch %q, want %s (%v)", round, got, last, err)
		}
		if !strings.Contains(shared, last) {
			t.Errorf("round %d: the shared resource is not batch %s's", round, last)
		}
	}
}

// A writer killed while copying a committed batch leaves some of its
// changes both copied and prewritten: a replica started then (which finishes
// nothing) and one started after a later writer finished the copy list
// each of the batch's changes once in history.
func TestHistoryAfterKillWhileCopying(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	// Prewritten (over 512 KiB), and copied in several transactions of 120
	// operations: the kill at the 3rd falls after its history record and
	// hundreds of its changes were copied.
	const n = 4000
	job, _ := json.Marshal(crashJob{Endpoints: c.Endpoints(), Prefix: p, Round: 0, N: n, Point: "copying", Nth: 3})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(job))
	out, err := cmd.CombinedOutput()
	if err == nil || len(out) != 0 {
		t.Fatalf("the writer was not killed mid-copy: %v %q", err, out)
	}
	cl := c.Client(t)
	r, err := cl.Get(context.Background(), p+"hu/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count == 0 || r.Count >= n+1 {
		t.Fatalf("%d changes copied when the writer died (%v), want some of %d", r.Count, err, n+1)
	}
	t.Logf("the writer died with %d of the batch's %d changes copied", r.Count, n+1)
	var rev int64
	check := func(what string, s store.Store) {
		t.Helper()
		l, err := s.Revisions(context.Background(), store.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var rv *store.Revision
		for i := range l.Revisions {
			if r := &l.Revisions[i]; r.Rev == rev || rev == 0 {
				rv = r
			}
		}
		if rv == nil {
			t.Fatalf("%s: the killed writer's revision is not in history: %+v", what, l)
		}
		rev = rv.Rev
		keys := map[string]int{}
		for _, ch := range rv.Changes {
			keys[string(store.ResKey(ch.Key))]++
		}
		if rv.Total != n+1 || len(rv.Changes) != n+1 || len(keys) != n+1 {
			t.Fatalf("%s: revision %d lists %d changes (total %d) of %d keys, want %d once each", what, rv.Rev, len(rv.Changes), rv.Total, len(keys), n+1)
		}
	}
	mid := open(t, c, p)
	check("a replica started with the copy half done", mid)
	// A later writer finishes the copy; a replica started then agrees.
	if _, err := mid.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{storetest.Cluster("after", "", "x")}}); err != nil {
		t.Fatal(err)
	}
	check("the replica that finished the copy", mid)
	fresh := open(t, c, p)
	check("a replica started after the copy was finished", fresh)
}

// A record edited behind xdsd's back (issue 27 point 10): opening the
// store fails naming the etcd key and the command that repairs it; a
// replica that was running reports it (Damaged, for /readyz) once it
// reads it; and a store opened to repair (xdsd restore) replaces it
// without the key being deleted by hand first: its next apply overwrites
// a damaged record it puts and deletes one it does not, and the store
// opens again.
func TestDamagedRecordNamed(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	s := open(t, c, p)
	running := open(t, c, p)
	if _, err := s.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{
		storetest.Cluster("victim", "", "1"), storetest.Cluster("gone", "", "1"), storetest.Cluster("kept", "", "1")}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cl := c.Client(t)
	r, err := cl.Get(context.Background(), p+"r/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 3 {
		t.Fatalf("%d records under r/: %v", len(r.Kvs), err)
	}
	var victim, gone string
	for _, kv := range r.Kvs {
		switch k := string(kv.Key); {
		case strings.Contains(k, "victim"):
			victim = k
		case strings.Contains(k, "gone"):
			gone = k
		}
	}
	for _, k := range []string{victim, gone} {
		if _, err := cl.Put(context.Background(), k, "\xff\xffnot a record"); err != nil {
			t.Fatal(err)
		}
	}
	// A store opened plainly (a server starting) refuses, naming a key and
	// the repair.
	_, err = etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: p, RequestTimeout: testRequestTimeout})
	want := "xdsd restore --store etcd://" + strings.Join(c.Endpoints(), ",") + strings.TrimSuffix(p, "/") + " FILE"
	if err == nil || !(strings.Contains(err.Error(), strconv.Quote(victim)) || strings.Contains(err.Error(), strconv.Quote(gone))) || !strings.Contains(err.Error(), want) {
		t.Fatalf("opening a store with a damaged record: %v, want a damaged key and %q", err, want)
	}
	t.Log(err)

	// The running replica goes on serving what it loaded, and reports the
	// damage once it reads the records (the background check).
	if running.Damaged() != "" {
		t.Fatalf("damage reported before it was read: %s", running.Damaged())
	}
	if err := running.Check(context.Background()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("check of a damaged store: %v", err)
	}
	if d := running.Damaged(); !strings.Contains(d, "is damaged") || !strings.Contains(d, want) {
		t.Fatalf("Damaged() = %q, want the key and %q", d, want)
	}

	// Restore's open: the damaged records are left out of the state, and
	// the next apply (the backup's state: victim and kept) replaces victim
	// and deletes gone.
	rs, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: p, RequestTimeout: testRequestTimeout, Repair: true})
	if err != nil {
		t.Fatalf("opening to repair: %v", err)
	}
	defer rs.Close()
	vs, err := rs.StateAt(context.Background(), rs.Rev(), store.Filter{})
	if err != nil || len(vs) != 1 || vs[0].Name != "kept" {
		t.Fatalf("the repairing store's state: %v %v, want kept alone", vs, err)
	}
	res, err := rs.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{storetest.Cluster("victim", "", "restored")}})
	if err != nil {
		t.Fatalf("the repairing apply: %v", err)
	}
	l, err := rs.Revisions(context.Background(), store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var last store.Revision
	for _, r := range l.Revisions {
		if r.Rev == res.Rev {
			last = r
		}
	}
	var listed []string
	for _, ch := range last.Changes {
		listed = append(listed, ch.Key.Name+" "+string(ch.Op))
	}
	slices.Sort(listed)
	t.Logf("revision %d lists %q", res.Rev, listed)
	if !slices.Equal(listed, []string{"gone deleted", "victim created"}) {
		t.Fatalf("revision %d lists %q, want gone deleted and victim created", res.Rev, listed)
	}
	if r, err := cl.Get(context.Background(), gone); err != nil || len(r.Kvs) != 0 {
		t.Fatalf("the damaged record the backup lacks is still there: %v %v", r.Kvs, err)
	}

	// The store opens again, with the restored state; the running replica
	// follows it, and its next check finds nothing damaged.
	again := open(t, c, p)
	want2 := map[string]string{"victim": "restored", "kept": "1"}
	for _, st := range []*etcd.Store{again, running} {
		testutil.Eventually(t, "the restored state", func() bool {
			vs, err := st.StateAt(context.Background(), st.Rev(), store.Filter{})
			if err != nil || len(vs) != 2 {
				return false
			}
			for _, v := range vs {
				if tagOf(t, v) != want2[v.Name] {
					return false
				}
			}
			return true
		})
	}
	if err := running.Check(context.Background()); err != nil || running.Damaged() != "" {
		t.Fatalf("check after the repair: %v, Damaged() = %q", err, running.Damaged())
	}
}

// tagOf is a stored cluster's alt_stat_name (storetest.Cluster's tag).
func tagOf(t *testing.T, v *resource.Variant) string {
	t.Helper()
	m, err := v.Message()
	if err != nil {
		t.Fatal(err)
	}
	return m.(*clusterv3.Cluster).GetAltStatName()
}

// A running replica that reloads the whole state (after a compaction of
// its watch, say) and meets a damaged record keeps serving the state it
// had, and reports the damage (Damaged, for /readyz) until a reload finds
// none.
func TestReloadReportsDamage(t *testing.T) {
	c := etcdtest.Start(t, 1)
	p := freshPrefix()
	s := open(t, c, p)
	if _, err := s.Apply(context.Background(), store.Batch{Puts: []*resource.Variant{storetest.Cluster("victim", "", "1")}}); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(t)
	r, err := cl.Get(context.Background(), p+"r/", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("%d records under r/: %v", len(r.Kvs), err)
	}
	good := r.Kvs[0].Value
	key := string(r.Kvs[0].Key)
	if _, err := cl.Put(context.Background(), key, "\xff\xffnot a record"); err != nil {
		t.Fatal(err)
	}
	if err := etcd.Reload(s); err == nil {
		t.Fatal("a reload over a damaged record succeeded")
	}
	if d := s.Damaged(); !strings.Contains(d, strconv.Quote(key)) || !strings.Contains(d, "xdsd restore --store etcd://") {
		t.Fatalf("Damaged() = %q, want the key and the repair", d)
	}
	vs, err := s.StateAt(context.Background(), s.Rev(), store.Filter{})
	if err != nil || len(vs) != 1 || tagOf(t, vs[0]) != "1" {
		t.Fatalf("the replica's state after the failed reload: %v %v, want victim as loaded", vs, err)
	}
	if _, err := cl.Put(context.Background(), key, string(good)); err != nil {
		t.Fatal(err)
	}
	if err := etcd.Reload(s); err != nil || s.Damaged() != "" {
		t.Fatalf("a reload after the record was put back: %v, Damaged() = %q", err, s.Damaged())
	}
}
