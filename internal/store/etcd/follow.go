package etcd

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sort"
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
			ops, err = s.stagedOps(ctx, h.Batch, kv.ModRevision)
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
	data := map[[2]string]map[string]*resource.Variant{}
	meta := map[string][]byte{}
	rp := s.key("r/")
	err = s.scan(ctx, rp, erev, false, func(k, v []byte) error {
		key, err := store.SplitKey(k[len(rp):])
		if err != nil {
			return err
		}
		vr, err := store.DecodeRecord(key, v)
		if err != nil {
			return err
		}
		g := [2]string{key.Type, key.Name}
		if data[g] == nil {
			data[g] = map[string]*resource.Variant{}
		}
		data[g][key.Constraints] = vr
		return nil
	})
	if err != nil {
		return 0, err
	}
	mp := s.key("m/")
	err = s.scan(ctx, mp, erev, false, func(k, v []byte) error {
		meta[string(k[len(mp):])] = bytes.Clone(v)
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
		ops, err := s.stagedOps(ctx, h.Batch, erev)
		if err != nil {
			return 0, err
		}
		applyTo(data, meta, ops, s.log)
		hops = append(hops, ops...)
	}
	// The history kept: the revisions up to head's, without a gap.
	hist := historyOf(hops, s.log)
	i := len(hist)
	for i > 0 && hist[i-1].rev == h.Rev-int64(len(hist)-i) {
		i--
	}
	hist = hist[i:]
	compacted := h.Rev
	if len(hist) > 0 {
		compacted = hist[0].rev - 1
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	changed := s.rev != h.Rev || len(diff(s.data, data)) > 0
	if h.Rev < s.rev {
		s.log.Warn("etcd store: the stored state went back", "from", s.rev, "to", h.Rev)
	}
	s.data, s.meta, s.headVer = data, meta, ver
	s.rev, s.hist, s.compacted = h.Rev, hist, compacted
	if changed {
		s.notify.Wake()
	}
	return erev, nil
}

// historyOf gathers the revisions whose records and changes ops hold,
// oldest first.
func historyOf(ops []op, log interface{ Error(string, ...any) }) []entry {
	by := map[int64]*entry{}
	get := func(rev int64) *entry {
		e := by[rev]
		if e == nil {
			e = &entry{rev: rev, undo: map[resource.Key]*resource.Variant{}}
			by[rev] = e
		}
		return e
	}
	var changes = map[int64][]store.Change{}
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
			get(rev).rec = r
		case opChange:
			rs, rk, ok := strings.Cut(string(o.key), "/")
			rev, err := strconv.ParseInt(rs, 10, 64)
			k, kerr := store.SplitKey([]byte(rk))
			if !ok || err != nil || kerr != nil || len(o.val) == 0 {
				log.Error("etcd store: bad change record", "key", string(o.key))
				continue
			}
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
				e.undo[k] = prev
			}
			changes[rev] = append(changes[rev], c)
		}
	}
	out := make([]entry, 0, len(by))
	for rev, e := range by {
		if e.rec.Rev != rev {
			continue // trimmed, or its record is lost: not history
		}
		cs := changes[rev]
		slices.SortFunc(cs, func(a, b store.Change) int { return store.CompareKeys(a.Key, b.Key) })
		e.rec.Changes, e.rec.Total = cs, len(cs)
		for _, c := range cs {
			e.keys = append(e.keys, c.Key)
		}
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b entry) int { return cmp.Compare(a.rev, b.rev) })
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
	out := store.RevisionList{Rev: s.rev, Oldest: s.compacted}
	for i := len(s.hist) - 1; i >= 0 && !q.Full(len(out.Revisions)); i-- {
		if !q.Wants(s.hist[i].rev, len(out.Revisions)) {
			continue
		}
		if r, ok := q.Filter.Select(s.hist[i].rec); ok {
			out.Revisions = append(out.Revisions, r)
		}
	}
	return out, nil
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
	s.catchUp(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if err := store.CheckStateAt(rev, s.rev, s.compacted); err != nil {
		return nil, err
	}
	var now []*resource.Variant
	for g, m := range s.data {
		if f.Type != "" && g[0] != f.Type || f.Name != "" && g[1] != f.Name {
			continue
		}
		for _, v := range m {
			now = append(now, v)
		}
	}
	w := store.NewRewinder(now, f)
	for i := len(s.hist) - 1; i >= 0 && s.hist[i].rev > rev; i-- {
		undo := s.hist[i].undo
		if err := w.Undo(s.hist[i].rec, func(k resource.Key) (*resource.Variant, error) { return undo[k], nil }); err != nil {
			return nil, err
		}
	}
	return w.State(), nil
}

// diff lists the keys whose variant differs between two states.
func diff(old, cur map[[2]string]map[string]*resource.Variant) []resource.Key {
	var keys []resource.Key
	for g, m := range cur {
		for ck, v := range m {
			if o := old[g][ck]; o == nil || o.Version != v.Version || !o.SameContent(v) {
				keys = append(keys, resource.Key{Type: g[0], Name: g[1], Constraints: ck})
			}
		}
	}
	for g, m := range old {
		for ck := range m {
			if cur[g][ck] == nil {
				keys = append(keys, resource.Key{Type: g[0], Name: g[1], Constraints: ck})
			}
		}
	}
	return keys
}

// follow watches head from etcd revision erev+1 and applies each change,
// reloading after a compaction.
func (s *Store) follow(ctx context.Context, erev int64) {
	probed := make(chan struct{})
	defer func() { <-probed; close(s.done) }()
	go func() { defer close(probed); s.probe(ctx) }()
	from := erev + 1
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := s.c.Watch(wctx, s.headKey(), clientv3.WithRev(from))
		for resp := range wch {
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				s.log.Info("etcd store: watch compacted; reloading the whole state", "from", from)
				if e, err := s.reload(ctx); err == nil {
					from = e + 1
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
				}
				break
			}
		}
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probe checks, every ProbeInterval, that a quorum of etcd answers, for
// Unreachable.
func (s *Store) probe(ctx context.Context) {
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, ProbeInterval)
		_, err := s.c.Get(pctx, s.headKey(), clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		s.setReach(err)
	}
}

// ProbeInterval is how often a Store checks that etcd answers.
var ProbeInterval = 2 * time.Second

func applyTo(data map[[2]string]map[string]*resource.Variant, meta map[string][]byte, ops []op, log interface {
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
			g := [2]string{k.Type, k.Name}
			if o.kind == opDelete {
				delete(data[g], k.Constraints)
				if len(data[g]) == 0 {
					delete(data, g)
				}
			} else {
				v, err := store.DecodeRecord(k, o.val)
				if err != nil {
					log.Error("etcd store: bad record", "key", k, "err", err)
					continue
				}
				if data[g] == nil {
					data[g] = map[string]*resource.Variant{}
				}
				data[g][k.Constraints] = v
			}
			keys = append(keys, k)
		case opMeta:
			meta[string(o.key)] = bytes.Clone(o.val)
		case opDelMeta:
			delete(meta, string(o.key))
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
	if since < 0 || since < s.compacted || since > s.rev {
		cs := store.ChangeSet{Rev: s.rev, Reset: true}
		for _, m := range s.data {
			for _, v := range m {
				cs.Puts = append(cs.Puts, v)
			}
		}
		sort.Slice(cs.Puts, func(i, j int) bool { return less(cs.Puts[i].Key(), cs.Puts[j].Key()) })
		return cs, nil
	}
	i := sort.Search(len(s.hist), func(i int) bool { return s.hist[i].rev > since })
	var keys []resource.Key
	for _, e := range s.hist[i:] {
		keys = append(keys, e.keys...)
	}
	return store.Coalesce(s.rev, keys, func(k resource.Key) (*resource.Variant, error) {
		return s.data[[2]string{k.Type, k.Name}][k.Constraints], nil
	})
}

func less(a, b resource.Key) bool {
	if a.Type != b.Type {
		return a.Type < b.Type
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.Constraints < b.Constraints
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
	return s.rev
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
	return bytes.Clone(s.meta[key]), nil
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
