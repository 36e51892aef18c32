package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// A batch can be prewritten while it is still being read (store.Prewriter): the
// bodies of its resources new to the store, or whose payloads differ from
// the stored ones, are written in the background,
// a step of about Options.PrewriteBytes at a time, while the rest of the
// batch is decoded. Apply then has only the records to write.
//
// The revision such a batch will commit is not known while it is read (a
// concurrent Apply may take the next one first), so each step's bodies
// are keyed by a reference of their own, not by a revision: prewriteRefBit
// with a sequence number kept in the file (keyPrewriteSeq), under which the
// bodies of a step follow those of every earlier step, and every
// revision's. A record refers to its body by whatever reference keyed it,
// so a committed batch's records refer to their steps' references. The
// references of a batch not committed yet are listed in bucketPrewrite;
// the commit removes them from the list in the same transaction. A
// prewrite abandoned (the read failed, the batch was refused) removes its
// bodies and references; a crash leaves them listed, and Open removes
// them.

var (
	// bucketPrewrite lists the references of steps prewritten for batches
	// not committed yet. Files made before it existed get it on open;
	// the format is unchanged (a record's reference was always opaque).
	bucketPrewrite = []byte("staging")  // (its name in files, from before "prewrite")
	keyPrewriteSeq = []byte("stageseq") // (likewise)
)

// prewriteRefBit marks a reference made by a prewrite step, apart from the
// revisions that key the other bodies.
const prewriteRefBit = 1 << 63

// aheadSteps is how many steps prewritten ahead make a step of Apply
// (Options.PrewriteBytes): what is left to write once the batch is read is
// at most one step, which Apply waits for; a quarter of 16 MiB takes
// about 25 ms here.
const aheadSteps = 4

// prewriteQueue bounds the steps a reader may hand over ahead of the
// writer. A step holds references to variants the batch holds anyway.
const prewriteQueue = 64

// prewrite is a batch being prewritten as it is read.
type prewrite struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	step   []*resource.Variant
	size   int
	queued bool // a step was handed to the writer
	steps  chan []*resource.Variant
	done   chan struct{}
	once   sync.Once
	ended  bool // Apply or Close was called

	// The writer's, read once done is closed.
	err  error
	refs [][]byte                     // the references of the steps written
	at   map[*resource.Variant]uint64 // the reference of each variant prewritten
}

var _ store.Prewriter = (*Store)(nil)

// Stage implements store.Prewriter. A store with PrewriteBytes < 0 (one
// transaction whatever the size) prewrites nothing ahead.
func (s *Store) Prewrite(ctx context.Context) store.Prewrite {
	ctx, cancel := context.WithCancel(ctx)
	return &prewrite{s: s, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// Add implements store.Prewrite.
func (st *prewrite) Add(v *resource.Variant) {
	if st.ended || st.s.prewriteBytes <= 0 {
		return
	}
	st.step = append(st.step, v)
	st.size += v.Size()
	if st.size >= max(st.s.prewriteBytes/aheadSteps, 1) {
		st.handOver()
	}
}

// handOver gives the step to the writer, started with the first.
func (st *prewrite) handOver() {
	if !st.queued {
		st.queued = true
		st.steps = make(chan []*resource.Variant, prewriteQueue)
		st.at = map[*resource.Variant]uint64{}
		go st.write()
	}
	st.steps <- st.step
	st.step, st.size = nil, 0
}

// write writes the steps handed over, each in a transaction, until one
// fails; it drains the rest.
func (st *prewrite) write() {
	defer close(st.done)
	for step := range st.steps {
		if st.err != nil {
			continue
		}
		if st.err = st.ctx.Err(); st.err == nil {
			st.err = st.writeStep(step)
		}
	}
}

// writeStep writes the bodies of the variants of step that the store
// does not hold as they are, under a reference of their own, in key
// order.
func (st *prewrite) writeStep(step []*resource.Variant) error {
	slices.SortFunc(step, comparePuts)
	var at []*resource.Variant
	var ref []byte
	err := st.s.db.Update(func(tx *bbolt.Tx) error {
		at = at[:0]
		meta := tx.Bucket(bucketMeta)
		seq := getU64(meta.Get(keyPrewriteSeq)) + 1
		ref = u64(prewriteRefBit | seq)
		if err := meta.Put(keyPrewriteSeq, u64(seq)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPrewrite).Put(ref, nil); err != nil {
			return err
		}
		res, bodies := tx.Bucket(bucketRes), tx.Bucket(bucketBody)
		bodies.FillPercent = 1
		for _, v := range step {
			if v.Size() == 0 {
				continue // kept in its record
			}
			k := resKey(v.Key())
			if rec := res.Get(k); rec != nil {
				// Stored: prewritten if its payload differs (the plan says
				// whether it changes; a payload prewritten for nothing is
				// removed by the commit).
				_, body, err := store.PeekHead(v.Key(), rec, func(ref []byte) []byte { return bodies.Get(bodyKey(k, ref)) })
				if err == nil && bytes.Equal(body, v.Body()) {
					continue
				}
			}
			if err := bodies.Put(bodyKey(k, ref), v.Body()); err != nil {
				return err
			}
			at = append(at, v)
		}
		return nil
	})
	if errors.Is(err, bberrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	if err != nil {
		return fmt.Errorf("prewriting a batch's bodies: %w", err)
	}
	st.refs = append(st.refs, ref)
	for _, v := range at {
		st.at[v] = getU64(ref)
	}
	if prewriteHook != nil {
		prewriteHook(len(st.refs) - 1)
	}
	return nil
}

// finish waits for the writer once every step is handed over.
func (st *prewrite) finish() error {
	st.ended = true
	if !st.queued {
		return nil
	}
	if len(st.step) > 0 {
		st.handOver()
	}
	st.once.Do(func() { close(st.steps) })
	<-st.done
	return st.err
}

// Apply implements store.Prewrite.
func (st *prewrite) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	defer st.cancel()
	if st.ended {
		return store.Result{}, errors.New("a prewrite applied or closed already")
	}
	if err := st.finish(); err != nil {
		return store.Result{}, errors.Join(err, st.drop())
	}
	if !st.queued {
		return st.s.Apply(ctx, b)
	}
	res, err := st.s.apply(ctx, b, st)
	if err != nil {
		return store.Result{}, errors.Join(err, st.drop())
	}
	st.refs, st.at = nil, nil // the commit's now
	return res, nil
}

// Close implements store.Prewrite: what was prewritten and not applied is
// removed.
func (st *prewrite) Close() error {
	st.cancel()
	if st.ended && st.refs == nil {
		return nil
	}
	st.finish()
	return st.drop()
}

// drop removes the bodies and references of the steps written.
func (st *prewrite) drop() error {
	refs := st.refs
	st.refs, st.at = nil, nil
	if len(refs) == 0 {
		return nil
	}
	err := st.s.db.Update(func(tx *bbolt.Tx) error { return dropSteps(tx, refs) })
	if err != nil {
		return fmt.Errorf("removing the bodies prewritten for a batch not applied (the next open removes them): %w", err)
	}
	return nil
}

// dropSteps removes the bodies of the steps prewritten under refs, and the
// references from the list.
func dropSteps(tx *bbolt.Tx, refs [][]byte) error {
	bodies, list := tx.Bucket(bucketBody), tx.Bucket(bucketPrewrite)
	for _, ref := range refs {
		c := bodies.Cursor()
		for k, _ := c.Seek(ref); k != nil && bytes.HasPrefix(k, ref); k, _ = c.Seek(ref) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		if err := list.Delete(ref); err != nil {
			return err
		}
	}
	return nil
}

// dropAbandonedSteps removes, on open, the steps of batches a crash
// stopped before their commit.
func dropAbandonedSteps(tx *bbolt.Tx) error {
	var refs [][]byte
	err := tx.Bucket(bucketPrewrite).ForEach(func(k, _ []byte) error {
		refs = append(refs, bytes.Clone(k))
		return nil
	})
	if err != nil {
		return err
	}
	return dropSteps(tx, refs)
}

// prewrittenAhead is what the commit of a batch prewritten ahead needs: the
// reference of each body prewritten, by variant, taken out as the records
// refer to them (those left are of variants the batch does not change, or
// that the plan copied, and are removed), and the steps' references to
// take off the list. (By variant rather than key: 16 bytes an entry
// instead of 72, for 100,000 resources while the batch is live.)
type prewrittenAhead struct {
	at   map[*resource.Variant]uint64
	refs [][]byte
}

// commit finishes, in the commit's transaction, what the steps began: the
// bodies no record took are removed, and the steps are off the list.
func (sd *prewrittenAhead) commit(tx *bbolt.Tx) error {
	bodies, list := tx.Bucket(bucketBody), tx.Bucket(bucketPrewrite)
	for v, ref := range sd.at {
		if err := bodies.Delete(bodyKey(resKey(v.Key()), u64(ref))); err != nil {
			return err
		}
	}
	for _, ref := range sd.refs {
		if err := list.Delete(ref); err != nil {
			return err
		}
	}
	return nil
}

// take returns the reference under which the body of v was prewritten, if
// it was, and takes it out (sd may be nil).
func (sd *prewrittenAhead) take(v *resource.Variant) ([]byte, bool) {
	if sd == nil {
		return nil, false
	}
	ref, ok := sd.at[v]
	if !ok {
		return nil, false
	}
	delete(sd.at, v)
	return u64(ref), true
}

// without returns the variants of vs whose bodies were not prewritten (sd
// may be nil).
func (sd *prewrittenAhead) without(vs []*resource.Variant) []*resource.Variant {
	if sd == nil || len(sd.at) == 0 {
		return vs
	}
	out := make([]*resource.Variant, 0, max(len(vs)-len(sd.at), 0))
	for _, v := range vs {
		if _, ok := sd.at[v]; !ok {
			out = append(out, v)
		}
	}
	return out
}

// Apply's own prewrite: a batch over Options.PrewriteBytes that was not
// prewritten while it was read has the bodies of its new keys written by Apply
// in steps under the revision it will commit (keyPrewritten), before the
// transaction that commits the records.

// prewriteHook, when set (by tests), is called after each transaction of
// prewritten bodies.
var prewriteHook func(n int)

// prewrite writes the bodies of a batch's puts (in key order) for revision
// rev, in transactions of about s.prewriteBytes, the first of which records
// that revision rev is being prewritten.
func (s *Store) prewrite(ctx context.Context, rev int64, puts []*resource.Variant) error {
	ref := u64(uint64(rev))
	for i, n := 0, 0; i < len(puts); n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.db.Update(func(tx *bbolt.Tx) error {
			if n == 0 {
				if err := tx.Bucket(bucketMeta).Put(keyPrewritten, ref); err != nil {
					return err
				}
			}
			bodies := tx.Bucket(bucketBody)
			bodies.FillPercent = 1
			for size := 0; i < len(puts) && size < s.prewriteBytes; i++ {
				v := puts[i]
				if v.Size() == 0 {
					continue // kept in its record
				}
				if err := bodies.Put(bodyKey(resKey(v.Key()), ref), v.Body()); err != nil {
					return err
				}
				size += v.Size()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if prewriteHook != nil {
			prewriteHook(n)
		}
	}
	return nil
}

// newPuts returns those of puts, in key order, whose key the store does
// not hold, reading the records beside them in order.
func (s *Store) newPuts(puts []*resource.Variant) ([]*resource.Variant, error) {
	var news []*resource.Variant
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketRes).Cursor()
		at, _ := c.First()
		for _, v := range puts {
			k := resKey(v.Key())
			if at != nil && bytes.Compare(at, k) < 0 {
				at, _ = c.Seek(k)
			}
			if at == nil || !bytes.Equal(at, k) {
				news = append(news, v)
			}
		}
		return nil
	})
	return news, err
}

// notIn returns the variants of a whose keys are not those of b's; both
// are in key order (sortPuts), and b's keys are some of a's.
func notIn(a, b []*resource.Variant) []*resource.Variant {
	if len(b) == 0 {
		return a
	}
	var out []*resource.Variant
	j := 0
	for _, v := range a {
		for j < len(b) && store.CompareKeys(b[j].Key(), v.Key()) < 0 {
			j++
		}
		if j < len(b) && store.CompareKeys(b[j].Key(), v.Key()) == 0 {
			continue
		}
		out = append(out, v)
	}
	return out
}

// unstage removes what was prewritten for revision rev, after err (returned,
// joined with any failure of the removal; Open removes what is left).
func (s *Store) unstage(rev int64, err error) error {
	uerr := s.db.Update(func(tx *bbolt.Tx) error { return dropPrewritten(tx, rev) })
	if uerr != nil {
		uerr = fmt.Errorf("removing the bodies prewritten for revision %d (the next open removes them): %w", rev, uerr)
	}
	return errors.Join(err, uerr)
}

// dropPrewritten removes the bodies prewritten for revision rev, which no record
// refers to, and the mark that they are there.
func dropPrewritten(tx *bbolt.Tx, rev int64) error {
	ref := u64(uint64(rev))
	bodies := tx.Bucket(bucketBody)
	c := bodies.Cursor()
	for k, _ := c.Seek(ref); k != nil && bytes.HasPrefix(k, ref); k, _ = c.Seek(ref) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Delete(keyPrewritten)
}
