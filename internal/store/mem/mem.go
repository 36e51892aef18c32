package mem

import (
	"bytes"
	"context"
	"sort"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// DefaultHistory is how many revisions of change history a Store keeps for
// watchers that resume from a revision.
const DefaultHistory = 100000

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu        sync.Mutex
	rev       int64
	data      map[[2]string]map[string]*resource.Variant // (type, name) → constraint key → variant
	meta      map[string][]byte
	log       []entry
	compacted int64 // the log holds every revision after this one
	history   int
	notify    store.Notifier
	closed    bool
}

type entry struct {
	rev  int64
	keys []resource.Key
	rec  store.Revision
	undo map[resource.Key]*resource.Variant
}

// New returns an empty store keeping DefaultHistory revisions of history.
func New() *Store { return NewWithHistory(DefaultHistory) }

// NewWithHistory returns an empty store keeping n revisions of history.
func NewWithHistory(n int) *Store {
	if n < 1 {
		n = 1
	}
	return &Store{data: map[[2]string]map[string]*resource.Variant{}, meta: map[string][]byte{}, history: n}
}

type reader struct{ s *Store }

func (r reader) Variants(typeURL, name string) ([]*resource.Variant, error) {
	m := r.s.data[[2]string{typeURL, name}]
	out := make([]*resource.Variant, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Constraints.Key() < out[j].Constraints.Key() })
	return out, nil
}

// Apply implements store.Store.
func (s *Store) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Result{}, store.ErrClosed
	}
	if err := store.CheckIfRev(b, s.rev); err != nil {
		return store.Result{}, err
	}
	p, err := store.MakePlan(reader{s}, b, s.rev+1)
	if err != nil {
		return store.Result{}, err
	}
	for k, v := range p.Meta { // the plan's own copies
		if v == nil {
			delete(s.meta, k)
		} else {
			s.meta[k] = v
		}
	}
	if p.Empty() {
		return store.Result{Rev: s.rev}, nil
	}
	s.rev++
	e := entry{rev: s.rev, rec: store.NewRevision(s.rev, time.Now(), b.Audit, p), undo: p.Prev}
	for _, k := range p.Deletes {
		g := [2]string{k.Type, k.Name}
		delete(s.data[g], k.Constraints)
		if len(s.data[g]) == 0 {
			delete(s.data, g)
		}
		e.keys = append(e.keys, k)
	}
	for _, v := range p.Puts {
		k := v.Key()
		g := [2]string{k.Type, k.Name}
		if s.data[g] == nil {
			s.data[g] = map[string]*resource.Variant{}
		}
		s.data[g][k.Constraints] = v
		e.keys = append(e.keys, k)
	}
	s.log = append(s.log, e)
	if len(s.log) > s.history {
		drop := len(s.log) - s.history
		s.compacted = s.log[drop-1].rev
		s.log = append([]entry(nil), s.log[drop:]...)
	}
	s.notify.Wake()
	return p.Result(s.rev), nil
}

// Revisions implements store.Store.
func (s *Store) Revisions(ctx context.Context, q store.HistoryQuery) (store.RevisionList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.RevisionList{}, store.ErrClosed
	}
	out := store.RevisionList{Rev: s.rev, Oldest: s.compacted}
	for i := len(s.log) - 1; i >= 0 && !q.Full(len(out.Revisions)); i-- {
		if !q.Wants(s.log[i].rev, len(out.Revisions)) {
			continue
		}
		if r, ok := q.Filter.Select(s.log[i].rec); ok {
			out.Revisions = append(out.Revisions, r)
		}
	}
	return out, nil
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
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
	for i := len(s.log) - 1; i >= 0 && s.log[i].rev > rev; i-- {
		undo := s.log[i].undo
		if err := w.Undo(s.log[i].rec, func(k resource.Key) (*resource.Variant, error) { return undo[k], nil }); err != nil {
			return nil, err
		}
	}
	return w.State(), nil
}

// Changes implements store.Store.
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
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev > since })
	var keys []resource.Key
	for _, e := range s.log[i:] {
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

// Rev implements store.Store.
func (s *Store) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Meta implements store.Store.
func (s *Store) Meta(ctx context.Context, key string) ([]byte, error) {
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
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.notify.Wake()
	}
	return nil
}
