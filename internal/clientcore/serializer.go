package clientcore

import "sync"

// serializer runs callbacks one at a time, in the order they were
// scheduled, on a goroutine of its own (grpc-go's xDS client keeps its
// state the same way, with its CallbackSerializer): the state a
// serializer's callbacks touch has one owner, and needs no lock. Scheduling
// never blocks: the queue is unbounded, and a callback must not block for
// long.
type serializer struct {
	// after, if set, runs after each callback, on the goroutine.
	after func()

	mu     sync.Mutex // guards the queue only
	queue  []func()
	closed bool
	wake   chan struct{}
	done   chan struct{} // closed when the goroutine has ended
}

func newSerializer(after func()) *serializer {
	s := &serializer{after: after, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// Schedule queues f; it reports false, and f never runs, once the
// serializer is closed.
func (s *serializer) Schedule(f func()) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, f)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

// Do runs f on the serializer and waits for it. It reports false, f not
// having run, when the serializer is closed (or closes before f's turn).
// It must not be called from a callback of the same serializer, which
// would wait for itself.
func (s *serializer) Do(f func()) bool {
	ran := make(chan struct{})
	if !s.Schedule(func() { f(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-s.done:
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
}

// Close stops taking callbacks. Those queued already still run, then the
// goroutine ends (Done).
func (s *serializer) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Done is closed once the serializer's goroutine has ended.
func (s *serializer) Done() <-chan struct{} { return s.done }

func (s *serializer) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		q, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		for i, f := range q {
			q[i] = nil
			f()
			if s.after != nil {
				s.after()
			}
		}
		if len(q) > 0 {
			continue
		}
		if closed {
			return
		}
		<-s.wake
	}
}
