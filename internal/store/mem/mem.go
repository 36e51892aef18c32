package mem

import (
	"context"
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
	mu     sync.Mutex
	st     *store.MemState
	notify store.Notifier
	closed bool
	keys   map[string][]byte // store.Keyring
}

// New returns an empty store keeping DefaultHistory revisions of history.
func New() *Store { return NewWithHistory(DefaultHistory) }

// NewWithHistory returns an empty store keeping n revisions of history.
func NewWithHistory(n int) *Store {
	return &Store{st: store.NewMemState(n)}
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
	if err := store.CheckIfRev(b, s.st.Rev()); err != nil {
		return store.Result{}, err
	}
	p, err := store.MakePlan(s.st, b, s.st.Rev()+1)
	if err != nil {
		return store.Result{}, err
	}
	for k, v := range p.Meta { // the plan's own copies
		s.st.SetMeta(k, v)
	}
	if p.Empty() {
		return store.Result{Rev: s.st.Rev()}, nil
	}
	rev := s.st.Rev() + 1
	s.st.Commit(p, store.NewRevision(rev, time.Now(), b.Audit, p))
	s.notify.Wake()
	return p.Result(rev), nil
}

// Revisions implements store.Store.
func (s *Store) Revisions(ctx context.Context, q store.HistoryQuery) (store.RevisionList, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.RevisionList{}, store.ErrClosed
	}
	return s.st.Revisions(q), nil
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	return s.st.StateAt(rev, f)
}

// Changes implements store.Store.
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

// Rev implements store.Store.
func (s *Store) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Rev()
}

// Meta implements store.Store.
func (s *Store) Meta(ctx context.Context, key string) ([]byte, error) {
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
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.notify.Wake()
	}
	return nil
}

// Key implements store.Keyring: kept for the store's life.
func (s *Store) Key(_ context.Context, name string, fresh []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, store.ErrClosed
	}
	if k, ok := s.keys[name]; ok {
		return append([]byte(nil), k...), nil
	}
	if s.keys == nil {
		s.keys = map[string][]byte{}
	}
	s.keys[name] = append([]byte(nil), fresh...)
	return append([]byte(nil), fresh...), nil
}
