package etcd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// syncTo brings the copy to head kv (nil: no head yet): by applying its
// plan when it is the next head version, by a full reload otherwise. A
// head older than the copy's is ignored (the watch went past it).
func (s *Store) syncTo(ctx context.Context, resp *clientv3.GetResponse) error {
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) == 1 {
		kv = resp.Kvs[0]
	}
	return s.syncKV(ctx, kv)
}

func (s *Store) syncKV(ctx context.Context, kv *mvccpb.KeyValue) error {
	s.mu.Lock()
	have := s.headVer
	s.mu.Unlock()
	switch {
	case kv == nil && have == 0:
		return nil
	case kv != nil && kv.Version <= have:
		return nil
	case kv != nil && kv.Version == have+1:
		h, err := decodeHead(kv.Value)
		if err != nil {
			return err
		}
		var ops []op
		switch {
		case h.Batch == "":
			ops, err = decodeOps(h.Plan)
		case !h.Applied:
			ops, err = s.prewrittenOps(ctx, h.Batch, kv.ModRevision)
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			_, err = s.reload(ctx)
			return err
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		if s.headVer == kv.Version-1 {
			s.applyOps(h.Rev, ops)
			s.headVer = kv.Version
		}
		s.mu.Unlock()
		return nil
	}
	_, err := s.reload(ctx)
	return err
}

// reload reads the whole committed state at one etcd revision, which it
// returns, and makes the difference from the copy one change set.
func (s *Store) reload(ctx context.Context) (int64, error) {
	resp, err := s.readHead(ctx)
	if err != nil {
		return 0, err
	}
	erev := resp.Header.Revision
	var h head
	var ver int64
	if len(resp.Kvs) == 1 {
		if h, err = decodeHead(resp.Kvs[0].Value); err != nil {
			return 0, err
		}
		ver = resp.Kvs[0].Version
	}
	state := store.NewMemState(1)
	rp := s.key("r/")
	var repair [][]byte
	err = s.scan(ctx, rp, erev, false, func(k, v []byte) error {
		vr, err := s.decodeRecord(k, v)
		if err != nil && s.o.Repair {
			repair = append(repair, bytes.Clone(k[len(rp):]))
			return nil
		}
		if err != nil {
			return err
		}
		state.Put(vr)
		return nil
	})
	s.noteDamage(err)
	if err != nil {
		return 0, err
	}
	mp := s.key("m/")
	err = s.scan(ctx, mp, erev, false, func(k, v []byte) error {
		state.SetMeta(string(k[len(mp):]), bytes.Clone(v))
		return nil
	})
	if err != nil {
		return 0, err
	}
	var hops []op
	for _, hp := range []struct {
		prefix string
		kind   int
	}{{s.key("hr/"), opRev}, {s.key("hu/"), opChange}} {
		err = s.scan(ctx, hp.prefix, erev, false, func(k, v []byte) error {
			hops = append(hops, op{kind: hp.kind, key: bytes.Clone(k[len(hp.prefix):]), val: v})
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	if h.Batch != "" && !h.Applied {
		ops, err := s.prewrittenOps(ctx, h.Batch, erev)
		if err != nil {
			return 0, err
		}
		applyTo(state, ops, s.log)
		hops = append(hops, ops...)
	}
	// The history kept: the revisions up to head's, without a gap.
	hist := historyOf(hops, s.log)
	i := len(hist)
	for i > 0 && hist[i-1].Rev == h.Rev-int64(len(hist)-i) {
		i--
	}
	hist = hist[i:]
	compacted := h.Rev
	if len(hist) > 0 {
		compacted = hist[0].Rev - 1
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if h.Rev < s.st.Rev() {
		s.log.Warn("etcd store: the stored state went back", "from", s.st.Rev(), "to", h.Rev)
	}
	changed := s.st.Replace(h.Rev, state, hist, compacted)
	s.headVer = ver
	s.repair = repair
	if changed {
		s.notify.Wake()
	}
	return erev, nil
}

// decodeRecord decodes the record at etcd key k (under r/), or returns a
// damagedError naming the key.
func (s *Store) decodeRecord(k, v []byte) (*resource.Variant, error) {
	key, err := store.SplitKey(k[len(s.key("r/")):])
	if err == nil {
		var vr *resource.Variant
		if vr, err = store.DecodeRecord(key, v); err == nil {
			return vr, nil
		}
	}
	return nil, &damagedError{key: string(k), err: err,
		url: "etcd://" + strings.Join(s.o.Endpoints, ",") + strings.TrimSuffix(s.o.Prefix, "/")}
}

// damagedError is a record under r/ that does not decode: edited behind
// xdsd's back, or damaged in etcd. It names the etcd key, and the command
// that repairs it: restore replaces the damaged record (Options.Repair).
type damagedError struct {
	key, url string
	err      error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("etcd key %q is damaged: %v; put a backup back with `xdsd restore --store %s FILE`, which replaces it",
		e.key, e.err, e.url)
}

func (e *damagedError) Unwrap() error { return e.err }

// noteDamage records what a full read of the records found, for Damaged:
// a damaged record, or none (err nil). Other errors (etcd unreachable)
// say nothing of the records and leave it as it was.
func (s *Store) noteDamage(err error) {
	var de *damagedError
	switch {
	case err == nil:
	case errors.As(err, &de):
	default:
		return
	}
	s.mu.Lock()
	was := s.damage
	s.damage = ""
	if err != nil {
		s.damage = err.Error()
	}
	running := s.cancel != nil // Open returns its own error
	s.mu.Unlock()
	switch {
	case !running:
	case err != nil && was == "":
		s.log.Error("etcd store: a record is damaged; serving the state loaded before, /readyz degraded", "err", err)
	case err == nil && was != "":
		s.log.Info("etcd store: no record is damaged any more")
	}
}

// Damaged says which record the last full read of the records found
// damaged, with the repair, or "" when it found none: a running replica
// keeps serving the state it loaded, and /readyz shows it.
func (s *Store) Damaged() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.damage
}

// Check implements store.Checker: it reads every record under the
// prefix, at one etcd revision, and reports the first that does not
// decode (also kept for Damaged). A record edited behind xdsd's back
// changes no head, so a running replica would not read it otherwise.
func (s *Store) Check(ctx context.Context) error {
	rp := s.key("r/")
	resp, err := s.readHead(ctx)
	if err != nil {
		return err
	}
	err = s.scan(ctx, rp, resp.Header.Revision, false, func(k, v []byte) error {
		_, err := s.decodeRecord(k, v)
		return err
	})
	s.noteDamage(err)
	if _, ok := errors.AsType[*damagedError](err); !ok {
		return nil // not damage: Unreachable says why etcd did not answer
	}
	return err
}

// historyOf gathers the revisions whose records and changes ops hold,
// oldest first.
func historyOf(ops []op, log interface{ Error(string, ...any) }) []store.LogEntry {
	by := map[int64]*store.LogEntry{}
	get := func(rev int64) *store.LogEntry {
		e := by[rev]
		if e == nil {
			e = &store.LogEntry{Rev: rev, Undo: map[resource.Key]*resource.Variant{}}
			by[rev] = e
		}
		return e
	}
	var changes = map[int64][]store.Change{}
	// A batch killed while being copied has some changes both copied
	// (hu/) and still prewritten: each is counted once, whatever order
	// ops holds them in, so that history lists it once.
	seen := map[string]bool{}
	for _, o := range ops {
		switch o.kind {
		case opRev:
			rev, err := strconv.ParseInt(string(o.key), 10, 64)
			if err != nil {
				log.Error("etcd store: bad revision record key", "key", string(o.key))
				continue
			}
			r, err := store.UnmarshalRevision(o.val)
			if err != nil {
				log.Error("etcd store: bad revision record", "rev", rev, "err", err)
				continue
			}
			get(rev).Rec = r
		case opChange:
			rs, rk, ok := strings.Cut(string(o.key), "/")
			rev, err := strconv.ParseInt(rs, 10, 64)
			k, kerr := store.SplitKey([]byte(rk))
			if !ok || err != nil || kerr != nil || len(o.val) == 0 {
				log.Error("etcd store: bad change record", "key", string(o.key))
				continue
			}
			if seen[string(o.key)] {
				continue
			}
			seen[string(o.key)] = true
			e := get(rev)
			c := store.Change{Key: k}
			switch o.val[0] {
			case chCreated:
				c.Op, c.Version = store.Created, store.Version(rev, k.Constraints)
			case chUpdated:
				c.Op, c.Version = store.Updated, store.Version(rev, k.Constraints)
			default:
				c.Op = store.Deleted
			}
			if len(o.val) > 1 {
				prev, err := store.DecodeRecord(k, o.val[1:])
				if err != nil {
					log.Error("etcd store: bad undo record", "key", k, "err", err)
					continue
				}
				e.Undo[k] = prev
			}
			changes[rev] = append(changes[rev], c)
		}
	}
	out := make([]store.LogEntry, 0, len(by))
	for rev, e := range by {
		if e.Rec.Rev != rev {
			continue // trimmed, or its record is lost: not history
		}
		cs := changes[rev]
		slices.SortFunc(cs, func(a, b store.Change) int { return store.CompareKeys(a.Key, b.Key) })
		e.Rec.Changes, e.Rec.Total = cs, len(cs)
		for _, c := range cs {
			e.Keys = append(e.Keys, c.Key)
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b store.LogEntry) int { return cmp.Compare(a.Rev, b.Rev) })
	return out
}

// catchUp brings the copy to etcd's latest head, when etcd answers: the
// history a replica shows includes what other replicas wrote.
func (s *Store) catchUp(ctx context.Context) {
	if resp, err := s.readHead(ctx); err == nil {
		s.syncTo(ctx, resp)
	}
}

// Revisions implements store.Store, from the history this replica holds
// (the same on every replica: it is read from etcd).
func (s *Store) Revisions(ctx context.Context, q store.HistoryQuery) (store.RevisionList, error) {
	s.catchUp(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.RevisionList{}, store.ErrClosed
	}
	return s.st.Revisions(q), nil
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
	s.catchUp(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	return s.st.StateAt(rev, f)
}

// follow watches head from etcd revision erev+1 and applies each change,
// reloading after a compaction.
func (s *Store) follow(ctx context.Context, erev int64) {
	probed := make(chan struct{})
	defer func() { <-probed; close(s.done) }()
	go func() { defer close(probed); s.probe(ctx) }()
	from := erev + 1
	for ctx.Err() == nil {
		// A reload that meets a damaged record (Damaged) is tried again
		// after a while, not at once: each one reads every record, and the
		// damage stays until a restore. One that could not reach etcd is
		// tried again soon, as before.
		pause := 200 * time.Millisecond
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := s.c.Watch(wctx, s.headKey(), clientv3.WithRev(from))
		for resp := range wch {
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				s.log.Info("etcd store: watch compacted; reloading the whole state", "from", from)
				if e, err := s.reload(ctx); err == nil {
					from = e + 1
				} else if _, ok := errors.AsType[*damagedError](err); ok {
					pause = 5 * time.Second
				}
				break
			}
			if err := resp.Err(); err != nil {
				break
			}
			var failed error
			for _, ev := range resp.Events {
				var kv *mvccpb.KeyValue
				if ev.Type == clientv3.EventTypePut {
					kv = ev.Kv
				}
				if err := s.syncKV(ctx, kv); err != nil {
					failed = err
					break
				}
				from = ev.Kv.ModRevision + 1
			}
			if failed != nil {
				s.log.Warn("etcd store: following head failed; reloading", "err", failed)
				if e, err := s.reload(ctx); err == nil {
					from = e + 1
				} else if _, ok := errors.AsType[*damagedError](err); ok {
					pause = 5 * time.Second
				}
				break
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// probe checks, every Options.ProbeInterval, that a quorum of etcd answers, for
// Unreachable.
func (s *Store) probe(ctx context.Context) {
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.o.ProbeInterval)
		_, err := s.c.Get(pctx, s.headKey(), clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.setReach(err)
	}
}

// applyTo applies a plan's operations to st and returns the keys of the
// variants they changed.
func applyTo(st *store.MemState, ops []op, log interface {
	Error(string, ...any)
}) []resource.Key {
	var keys []resource.Key
	for _, o := range ops {
		switch o.kind {
		case opPut, opDelete:
			k, err := store.SplitKey(o.key)
			if err != nil {
				log.Error("etcd store: bad key in a batch", "err", err)
				continue
			}
			if o.kind == opDelete {
				st.Delete(k)
			} else {
				v, err := store.DecodeRecord(k, o.val)
				if err != nil {
					log.Error("etcd store: bad record", "key", k, "err", err)
					continue
				}
				st.Put(v)
			}
			keys = append(keys, k)
		case opMeta:
			st.SetMeta(string(o.key), bytes.Clone(o.val))
		case opDelMeta:
			st.SetMeta(string(o.key), nil)
		}
	}
	return keys
}

// Changes implements store.Store, from the replica's copy.
func (s *Store) Changes(ctx context.Context, since int64) (store.ChangeSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ChangeSet{}, store.ErrClosed
	}
	return s.st.Changes(since)
}

// Updated implements store.Store.
func (s *Store) Updated() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify.C()
}

// Rev implements store.Store: the revision of the committed state this
// replica holds.
func (s *Store) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Rev()
}

// Meta implements store.Store. It first catches up with etcd, so that a
// writer on this replica sees metadata another replica wrote.
func (s *Store) Meta(ctx context.Context, key string) ([]byte, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	resp, err := s.readHead(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.syncTo(ctx, resp); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	return s.st.Meta(key), nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.notify.Wake()
	s.mu.Unlock()
	s.cancel()
	<-s.done
	return s.c.Close()
}
