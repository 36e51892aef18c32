package protocol

import (
	"sync"
)

// sendPool computes and sends the responses of a server's single-goroutine
// streams (runSingle) on a few goroutines that go from one stream to the
// next, rather than on a goroutine started for each stream with something
// to send and ended once it is sent: a change's fan-out to 5,000 streams
// started and ended 5,000 goroutines, about a tenth of the server's CPU
// per response (BENCHMARKS.md, "CPU per response against raw gRPC").
//
// A stream is queued when it is signalled with nothing being sent for it
// (stream.signal), and taken by one goroutine, which sends everything due
// on it before it takes the next: one stream is never sent on by two
// goroutines, so its responses keep their order.
//
// A slow client holds up no one else. A send may wait on the client's
// flow control for as long as the client likes, so while streams are
// queued the pool starts another goroutine whenever none is left outside
// a send. It starts tuning.SendWorkers goroutines in all when streams are
// queued, and one beyond those only then: starting one each time another
// entered a send (most sends return at once) started and ended a
// goroutine for every few responses again. A goroutine back from a send
// ends when more than SendWorkers are outside one. The goroutines end
// when the queue is empty, so an idle server, and an idle stream, keep
// none.
type sendPool struct {
	base    int // tuning.SendWorkers, read once: GOMAXPROCS takes a global lock
	mu      sync.Mutex
	queue   []*stream // queue[head:] are waiting, oldest first
	head    int
	workers int // goroutines running work
	sending int // of them, inside a send
}

// add queues s, whose sender state has just become senderRunning.
func (p *sendPool) add(s *stream) {
	p.mu.Lock()
	p.queue = append(p.queue, s)
	start := p.short()
	p.mu.Unlock()
	if start {
		go p.work()
	}
}

// short reports whether streams wait with fewer than base goroutines,
// or with every goroutine inside a send, and if so counts one more (p.mu
// held): the caller starts it.
func (p *sendPool) short() bool {
	if p.head < len(p.queue) && (p.workers < p.base || p.workers == p.sending) {
		p.workers++
		return true
	}
	return false
}

// work takes queued streams until none are left, or until more goroutines
// are free than needed (one came back from a long send).
func (p *sendPool) work() {
	p.mu.Lock()
	for p.head < len(p.queue) && p.workers-p.sending <= p.base {
		s := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head >= compactAt && 2*p.head >= len(p.queue) {
			// Never empty for long (a steady stream of changes): move
			// the waiting ones to the front rather than grow for good.
			n := copy(p.queue, p.queue[p.head:])
			clear(p.queue[n:])
			p.queue, p.head = p.queue[:n], 0
		}
		p.mu.Unlock()
		s.sendDue()
		p.mu.Lock()
	}
	p.workers--
	if p.head == len(p.queue) {
		// Empty: start again at the front. A queue grown past a fan-out's
		// size is let go rather than kept for the next one.
		p.head = 0
		if cap(p.queue) > maxKeptQueue {
			p.queue = nil
		} else {
			p.queue = p.queue[:0]
		}
	}
	p.mu.Unlock()
}

// maxKeptQueue is the longest queue kept for reuse once empty (8 bytes
// per place): a fan-out to more streams than that allocates its queue.
const maxKeptQueue = 16384

// compactAt is how many places taken from the front of a queue that is
// not empty yet are given back by moving the rest forward.
const compactAt = 1024

// send sends one message on s, counting the pool's goroutine as inside a
// send while it may wait on the client.
func (p *sendPool) send(s *stream, m any) error {
	p.mu.Lock()
	p.sending++
	start := p.short()
	p.mu.Unlock()
	if start {
		go p.work()
	}
	err := s.ss.SendMsg(m)
	p.mu.Lock()
	p.sending--
	p.mu.Unlock()
	return err
}
