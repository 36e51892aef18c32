package bolt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

const crashChildEnv = "XDSD_BOLT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "xdsd.db"))
	})
}

// stagingStore applies each batch as the admin API does: prewritten as it
// is read (bolt.Stage), a variant at a time, then applied.
type stagingStore struct{ *bolt.Store }

func (s stagingStore) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	st := s.Prewrite(ctx)
	defer st.Close()
	for _, v := range b.Puts {
		st.Add(v)
	}
	return st.Apply(ctx, b)
}

// The conformance suite again with every batch prewritten as it is read,
// each variant's body in a transaction of its own.
func TestConformancePrewrittenAhead(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "xdsd.db"), bolt.Options{PrewriteBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		return stagingStore{s}
	})
}

// The conformance suite again with every batch prewritten: its bodies
// written in transactions of their own before the one that commits it.
func TestConformancePrewritten(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "xdsd.db"), bolt.Options{PrewriteBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenLosesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	ctx := context.Background()
	for i := range 5 {
		c := storetest.Cluster(fmt.Sprintf("c%d", i), "", "x")
		c.TTL = time.Duration(i+1) * time.Second // TTLs and do_not_cache are stored too
		c.DoNotCache = i%2 == 0
		b := store.Batch{Puts: []*resource.Variant{
			storetest.Route("r", "env=prod", strconv.Itoa(i)),
			storetest.Route("r", "env=test", "t"),
			c,
		}, Meta: map[string][]byte{"last": []byte(strconv.Itoa(i)), fmt.Sprintf("k%d", i): []byte("x")}}
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Metadata alone is durable too, though it makes no revision.
	if _, err := s.Apply(ctx, store.Batch{Meta: map[string][]byte{"alone": []byte("y"), "k0": nil}}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	defer s.Close()
	if s.Rev() != 5 {
		t.Fatalf("reopened at rev %d, want 5", s.Rev())
	}
	for k, want := range map[string]string{"last": "4", "k0": "", "k4": "x", "alone": "y"} {
		if v, err := s.Meta(ctx, k); err != nil || string(v) != want {
			t.Errorf("metadata %s after reopen: %q %v, want %q", k, v, err, want)
		}
	}
	after, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Puts) != len(before.Puts) || len(after.Puts) != 7 {
		t.Fatalf("reopened with %d variants, had %d", len(after.Puts), len(before.Puts))
	}
	for i := range before.Puts {
		b, a := before.Puts[i], after.Puts[i]
		if a.Key() != b.Key() || a.Version != b.Version || !a.SameContent(b) {
			t.Errorf("variant %d: %v@%s became %v@%s", i, b.Key(), b.Version, a.Key(), a.Version)
		}
	}
	ttls := 0
	for _, v := range after.Puts {
		if v.TTL > 0 {
			ttls++
		}
	}
	if ttls != 5 {
		t.Errorf("%d variants kept their TTL, want 5", ttls)
	}
	// History survives too: a watcher resumes from revision 3.
	cs, err := s.Changes(ctx, 3)
	if err != nil || cs.Reset || len(cs.Puts) != 3 {
		t.Fatalf("resume after reopen: %+v %v", cs, err)
	}
}

func TestHistoryWindow(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "xdsd.db"), bolt.Options{History: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 5 {
		if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", strconv.Itoa(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if cs, err := s.Changes(ctx, 1); err != nil || !cs.Reset {
		t.Fatalf("from a trimmed revision: %+v %v", cs, err)
	}
	if cs, err := s.Changes(ctx, 4); err != nil || cs.Reset || len(cs.Puts) != 1 {
		t.Fatalf("within the window: %+v %v", cs, err)
	}
}

func TestFileInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	defer s.Close()
	_, err := bolt.Open(path, bolt.Options{LockTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second open: %v", err)
	}
}

// crashPrewrittenEnv makes the crash child prewrite its batches (bolt.Apply):
// 300 variants a batch, whose bodies are written in transactions of 2 KiB
// before the one that commits them.
const crashPrewrittenEnv = "XDSD_BOLT_CRASH_STAGED"

// crashAheadEnv, with crashPrewrittenEnv, makes the crash child prewrite its
// batches as they are read (bolt.Stage), as the admin API does.
const crashAheadEnv = "XDSD_BOLT_CRASH_AHEAD"

// perBatch is the size of the crash child's batches.
func perBatch() int {
	if os.Getenv(crashPrewrittenEnv) != "" {
		return 300
	}
	return 5
}

// crashChild applies batches of perBatch variants forever, printing
// "ack N" after batch N is acknowledged (and, when prewrite, "staged N"
// after each transaction of bodies), until it is killed.
func crashChild(path string) {
	opts := bolt.Options{History: 50}
	w := bufio.NewWriter(os.Stdout)
	if os.Getenv(crashPrewrittenEnv) != "" {
		opts.PrewriteBytes = 2048
		in := bufio.NewReader(os.Stdin)
		bolt.SetPrewriteHook(func(n int) {
			fmt.Fprintf(w, "staged %d\n", n)
			w.Flush()
			// Go on when told: the test kills the child here, between
			// two transactions of bodies, or lets it go on.
			if _, err := in.ReadByte(); err != nil {
				os.Exit(3)
			}
		})
	}
	s, err := bolt.Open(path, opts)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for n := s.Rev() + 1; ; n++ {
		var b store.Batch
		for j := range perBatch() {
			b.Puts = append(b.Puts, storetest.Cluster(fmt.Sprintf("b%d-%d", n, j), "", strconv.FormatInt(n, 10)))
		}
		// Also rewrite a shared resource, so batches overlap in content,
		// and metadata that must always name the last batch.
		b.Puts = append(b.Puts, storetest.Route("shared", "", strconv.FormatInt(n, 10)))
		b.Meta = map[string][]byte{"last": []byte(strconv.FormatInt(n, 10))}
		var r store.Result
		if os.Getenv(crashAheadEnv) != "" {
			b.Owned = true // (fresh variants, as the admin API's)
			r, err = stagingStore{s}.Apply(context.Background(), b)
		} else {
			r, err = s.Apply(context.Background(), b)
		}
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(2)
		}
		fmt.Fprintf(w, "ack %d\n", r.Rev)
		w.Flush()
	}
}

// A writer killed with SIGKILL at arbitrary points: on reopen, every batch it
// was told had succeeded is there, and no batch is there in part, its
// metadata included.
func TestCrashKeepsAcknowledgedBatches(t *testing.T) {
	crashRounds(t, false, []int{7, 1, 23, 12})
}

// The same for batches prewritten before their commit, killed while prewrite
// (between transactions of bodies), just before the commit and after it:
// a batch is all there or not at all, and no prewritten body is left behind
// (Verify finds a body no record refers to).
func TestCrashDuringPrewrittenBatches(t *testing.T) {
	t.Setenv(crashPrewrittenEnv, "1")
	crashRounds(t, true, []int{1, 4, 9, 17, 26, 40, 3})
}

// The same for batches prewritten as they are read (bolt.Stage): killed
// between two steps, just before the commit and after it.
func TestCrashDuringBatchesPrewrittenAhead(t *testing.T) {
	t.Setenv(crashPrewrittenEnv, "1")
	t.Setenv(crashAheadEnv, "1")
	crashRounds(t, true, []int{1, 4, 9, 17, 26, 40, 3})
}

// crashRounds runs the crash child, killing it after it has said
// killAfter[i] lines in round i, and checks the store after each.
func crashRounds(t *testing.T, prewritten bool, killAfter []int) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	var acked int64
	stagedSeen, midStage := 0, 0
	for round, killAfter := range killAfter {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		killedPrewriting := false
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		seen := 0
		for sc.Scan() {
			line := sc.Text()
			if _, ok := strings.CutPrefix(line, "staged "); ok && prewritten {
				stagedSeen++
				if seen++; seen == killAfter {
					killedPrewriting = true
					break
				}
				if _, err := in.Write([]byte{'\n'}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			rev, ok := strings.CutPrefix(line, "ack ")
			if !ok {
				t.Fatalf("round %d: child said %q", round, line)
			}
			acked, _ = strconv.ParseInt(rev, 10, 64)
			if seen++; seen == killAfter {
				break
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if killedPrewriting {
			// Killed between two transactions of bodies: some are
			// prewritten, under the mark that Open removes them by.
			midStage++
			rawView(t, path, func(tx *bbolt.Tx) {
				if os.Getenv(crashAheadEnv) != "" {
					if k, _ := tx.Bucket([]byte("staging")).Cursor().First(); k == nil {
						t.Errorf("round %d: killed while prewrite ahead, and no step listed", round)
					}
				} else if tx.Bucket([]byte("meta")).Get([]byte("staged")) == nil {
					t.Errorf("round %d: killed while prewrite, and no prewritten mark", round)
				}
			})
		}

		s := open(t, path)
		cs, err := s.Changes(context.Background(), store.FromStart)
		if err != nil {
			t.Fatal(err)
		}
		rev := s.Rev()
		last, err := s.Meta(context.Background(), "last")
		s.Close()
		// Before the first batch, the store is empty: no metadata, no
		// shared resource.
		want := strconv.FormatInt(rev, 10)
		if rev == 0 {
			want = ""
		}
		if err != nil || string(last) != want {
			t.Errorf("round %d: at rev %d the metadata names batch %q (%v)", round, rev, last, err)
		}
		if rev < acked {
			t.Fatalf("round %d: store at rev %d but batch %d was acknowledged", round, rev, acked)
		}
		batches := map[string]int{}
		var shared string
		for _, v := range cs.Puts {
			if v.Name == "shared" {
				shared = v.Version
				continue
			}
			n, _, _ := strings.Cut(strings.TrimPrefix(v.Name, "b"), "-")
			if v.Version != n {
				t.Errorf("round %d: %s has version %s", round, v.Name, v.Version)
			}
			batches[n]++
		}
		for n := int64(1); n <= rev; n++ {
			if c := batches[strconv.FormatInt(n, 10)]; c != perBatch() {
				t.Errorf("round %d: batch %d has %d of %d variants", round, n, c, perBatch())
			}
		}
		if _, err := bolt.Verify(path); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		rawView(t, path, func(tx *bbolt.Tx) {
			if k, _ := tx.Bucket([]byte("staging")).Cursor().First(); k != nil {
				t.Errorf("round %d: a step prewritten ahead is still listed after the reopen", round)
			}
		})
		if len(batches) != int(rev) || shared != want {
			t.Errorf("round %d: %d batches and shared@%s at rev %d", round, len(batches), shared, rev)
		}
		t.Logf("round %d: killed after ack %d; reopened at rev %d", round, acked, rev)
	}
	if prewritten && (stagedSeen == 0 || midStage == 0) {
		t.Errorf("%d transactions of prewritten bodies, %d kills among them", stagedSeen, midStage)
	}
}

func TestHistoryCompaction(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "xdsd.db"), bolt.Options{History: 3})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Compaction(t, s, 3)
}

// History is in the file: after a restart the records and the states of
// past revisions are as they were.
func TestHistorySurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		b := store.Batch{Puts: []*resource.Variant{storetest.Cluster("a", "", strconv.Itoa(i))}, Audit: store.Audit{Who: "u" + strconv.Itoa(i)}}
		if _, err := s.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.StateAt(ctx, 1, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path)
	defer s.Close()
	after, err := s.StateAt(ctx, 1, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || len(after) != 1 || after[0].Version != "1" || string(after[0].Body()) != string(before[0].Body()) {
		t.Fatalf("state at 1 after reopen: %v, before %v", after, before)
	}
	l, err := s.Revisions(ctx, store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Revisions) != 3 || l.Revisions[0].Audit.Who != "u3" || l.Revisions[2].Audit.Who != "u1" {
		t.Fatalf("records after reopen: %+v", l.Revisions)
	}
}

// A backup taken while batches commit is one committed revision, whole:
// opened, it holds that revision and every batch up to it, and nothing
// after.
func TestBackupIsConsistent(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "xdsd.db"))
	defer s.Close()
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Each batch writes 10 clusters with the same tag: a backup
			// holding some but not all of a batch's tag is torn.
			var b store.Batch
			for j := 0; j < 10; j++ {
				b.Puts = append(b.Puts, storetest.Cluster(fmt.Sprint("c", j), "", strconv.Itoa(i)))
			}
			if _, err := s.Apply(ctx, b); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for k := 0; k < 5; k++ {
		path := filepath.Join(dir, fmt.Sprint("backup", k, ".db"))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		rev, err := s.Backup(ctx, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := bolt.Verify(path); err != nil || got != rev {
			t.Fatalf("Verify(backup) = %d, %v; Backup said %d", got, err, rev)
		}
		b := open(t, path)
		cs, err := b.Changes(ctx, store.FromStart)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		tags := map[string]bool{}
		for _, v := range cs.Puts {
			tags[v.Version] = true
		}
		if cs.Rev != rev || (rev > 0 && (len(cs.Puts) != 10 || len(tags) != 1)) {
			t.Fatalf("backup at revision %d holds revision %d, %d variants, versions %v", rev, cs.Rev, len(cs.Puts), tags)
		}
	}
	close(stop)
	<-done
}

// stagedStore opens a store that prewrites batches over 100 bytes, holding
// clusters c00… (n of them, at version "1").
func stagedStore(t *testing.T, n int) (string, *bolt.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s, err := bolt.Open(path, bolt.Options{PrewriteBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	var first store.Batch
	for i := range n {
		first.Puts = append(first.Puts, storetest.Cluster(fmt.Sprintf("c%02d", i), "", "1"))
	}
	if _, err := s.Apply(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// A prewritten batch prewrites the bodies of new resources while its plan is
// made, and those of changed ones after: a batch of new, changed and
// unchanged resources is stored as it says, with no body left over; a
// batch whose plan fails leaves nothing prewritten.
func TestPrewrittenAheadOfThePlan(t *testing.T) {
	path, s := stagedStore(t, 40)
	ctx := context.Background()
	// c00–c19 unchanged, c20–c39 changed, n00–n19 new.
	var second store.Batch
	for i := range 40 {
		tag := "1"
		if i >= 20 {
			tag = "2"
		}
		second.Puts = append(second.Puts, storetest.Cluster(fmt.Sprintf("c%02d", i), "", tag))
	}
	for i := range 20 {
		second.Puts = append(second.Puts, storetest.Cluster(fmt.Sprintf("n%02d", i), "", "1"))
	}
	res, err := s.Apply(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Puts) != 40 {
		t.Fatalf("%d puts, want the 20 changed and the 20 new", len(res.Puts))
	}
	for i := range 40 {
		vs, err := s.StateAt(ctx, res.Rev, store.Filter{Type: resource.ClusterURL, Name: fmt.Sprintf("c%02d", i)})
		if err != nil || len(vs) != 1 {
			t.Fatalf("c%02d: %v %v", i, vs, err)
		}
		want := storetest.Cluster(fmt.Sprintf("c%02d", i), "", map[bool]string{true: "2", false: "1"}[i >= 20])
		if !vs[0].SameContent(want) {
			t.Errorf("c%02d holds the wrong content", i)
		}
	}
	// A plan that fails: a variant given twice, beside new resources
	// prewritten ahead of it.
	third := store.Batch{Puts: []*resource.Variant{storetest.Cluster("x", "", "1"), storetest.Cluster("x", "", "2")}}
	for i := range 20 {
		third.Puts = append(third.Puts, storetest.Cluster(fmt.Sprintf("m%02d", i), "", "1"))
	}
	var be *store.BatchError
	if _, err := s.Apply(ctx, third); !errors.As(err, &be) {
		t.Fatalf("a variant given twice: %v, want a BatchError", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawView(t, path, func(tx *bbolt.Tx) {
		if tx.Bucket([]byte("meta")).Get([]byte("staged")) != nil {
			t.Error("the failed batch left its prewritten mark")
		}
	})
	if _, err := bolt.Verify(path); err != nil {
		t.Errorf("Verify: %v (a prewritten body left over?)", err)
	}
}

// A batch prewritten as it is read (bolt.Stage) while another apply commits:
// the bodies of resources new when prewritten, or changed, are written ahead;
// one the other apply then put as the batch has it is unchanged (its
// prewritten body is removed), one it put otherwise is changed, with the
// prewritten body. A
// prewrite closed unapplied, or whose batch the plan refuses, leaves
// nothing behind.
func TestPrewrittenAsRead(t *testing.T) {
	path, s := stagedStore(t, 20)
	ctx := context.Background()
	steps := 0
	bolt.SetPrewriteHook(func(int) { steps++ })
	defer bolt.SetPrewriteHook(nil)
	// c00–c09 unchanged, c10–c19 changed, n00–n19 new.
	tag := func(name string) string {
		if name >= "c10" && name < "n" {
			return "2"
		}
		return "1"
	}
	var second store.Batch
	st := s.Prewrite(ctx)
	for i := range 20 {
		for _, n := range []string{fmt.Sprintf("c%02d", i), fmt.Sprintf("n%02d", i)} {
			v := storetest.Cluster(n, "", tag(n))
			second.Puts = append(second.Puts, v)
			st.Add(v)
		}
	}
	// Meanwhile: n00 as the batch has it, n01 otherwise.
	if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("n00", "", "1"), storetest.Cluster("n01", "", "9")}}); err != nil {
		t.Fatal(err)
	}
	second.Owned = true // as the admin API's: the plan keeps the batch's variants
	res, err := st.Apply(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close after Apply: %v", err)
	}
	if steps == 0 {
		t.Error("nothing was prewritten ahead")
	}
	if len(res.Puts) != 29 {
		t.Errorf("%d puts, want c10–c19 changed, n01 changed and n02–n19 new: %v", len(res.Puts), res.Puts)
	}
	for _, v := range second.Puts {
		vs, err := s.StateAt(ctx, res.Rev, store.Filter{Type: resource.ClusterURL, Name: v.Name})
		if err != nil || len(vs) != 1 || !vs[0].SameContent(v) {
			t.Errorf("%s: %v %v, want the batch's", v.Name, vs, err)
		}
	}

	// Prewritten, then closed without an apply.
	st = s.Prewrite(ctx)
	for i := range 20 {
		st.Add(storetest.Cluster(fmt.Sprintf("x%02d", i), "", "1"))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Prewritten, and refused by the plan: a variant given twice.
	third := store.Batch{Puts: []*resource.Variant{storetest.Cluster("y", "", "1"), storetest.Cluster("y", "", "2")}}
	for i := range 20 {
		third.Puts = append(third.Puts, storetest.Cluster(fmt.Sprintf("m%02d", i), "", "1"))
	}
	st = s.Prewrite(ctx)
	for _, v := range third.Puts {
		st.Add(v)
	}
	var be *store.BatchError
	if _, err := st.Apply(ctx, third); !errors.As(err, &be) {
		t.Fatalf("a variant given twice: %v, want a BatchError", err)
	}
	st.Close()
	if s.Rev() != res.Rev {
		t.Errorf("rev %d after the batches not applied, want %d", s.Rev(), res.Rev)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rawView(t, path, func(tx *bbolt.Tx) {
		if k, _ := tx.Bucket([]byte("staging")).Cursor().First(); k != nil {
			t.Errorf("a step is still listed: %x", k)
		}
		// The records of the new and changed resources refer to the
		// bodies prewritten ahead (a step's reference has its top bit set);
		// those of the unchanged ones to what the first batch wrote.
		// (n01: either, as the writer and the other apply raced.)
		for _, name := range []string{"n02", "n19", "c10", "c19", "c00", "c09"} {
			rec := tx.Bucket([]byte("resources")).Get(store.ResKey(resource.Key{Type: resource.ClusterURL, Name: name}))
			ref := store.BodyRef(rec)
			if ahead := len(ref) == 8 && ref[0]&0x80 != 0; ahead != (tag(name) == "2" || name[0] == 'n') {
				t.Errorf("%s refers to its body by %x: prewritten ahead %v", name, ref, ahead)
			}
		}
	})
	if _, err := bolt.Verify(path); err != nil {
		t.Errorf("Verify: %v (a prewritten body left over?)", err)
	}
}

// With Preload, the first load from the start is what Open read, the
// same as a load without it (TTLs, versions and content included); a
// batch applied before it is loaded from the file instead, and a second
// load reads the file too.
func TestPreloadServesTheFirstLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "xdsd.db")
	s := open(t, path)
	ctx := context.Background()
	for i := range 3 {
		c := storetest.Cluster(fmt.Sprintf("c%d", i), "", "x")
		c.TTL = time.Duration(i+1) * time.Second
		if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{c, storetest.Route("r", "env=prod", strconv.Itoa(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	same := func(what string, got store.ChangeSet) {
		t.Helper()
		if got.Rev != want.Rev || !got.Reset || len(got.Puts) != len(want.Puts) {
			t.Fatalf("%s: rev %d reset %v, %d variants; want rev %d, %d", what, got.Rev, got.Reset, len(got.Puts), want.Rev, len(want.Puts))
		}
		for i, v := range got.Puts {
			w := want.Puts[i]
			if v.Key() != w.Key() || v.Version != w.Version || v.TTL != w.TTL || !v.SameContent(w) {
				t.Errorf("%s: variant %d: %v@%s, want %v@%s", what, i, v.Key(), v.Version, w.Key(), w.Version)
			}
		}
	}
	s, err = bolt.Open(path, bolt.Options{Preload: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	same("the first load", first)
	again, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	same("the second load", again)
	if &first.Puts[0] == &again.Puts[0] {
		t.Error("the second load is what Open read: it should read the file")
	}
	s.Close()

	// A batch between Open and the first load: the load reads the file.
	s, err = bolt.Open(path, bolt.Options{Preload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply(ctx, store.Batch{Puts: []*resource.Variant{storetest.Cluster("c9", "", "y")}}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Changes(ctx, store.FromStart)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Rev != want.Rev+1 || len(cs.Puts) != len(want.Puts)+1 {
		t.Errorf("after a batch: rev %d, %d variants; want %d, %d", cs.Rev, len(cs.Puts), want.Rev+1, len(want.Puts)+1)
	}
}
