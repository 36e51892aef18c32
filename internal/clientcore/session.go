package clientcore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// A channel's ADS stream is kept by its goroutines, below: run picks a
// server, with backoff and fallback, and runs one session at a time; a
// session sends the requests due and, on a goroutine of its own, receives
// responses. They own the backoff state; everything else they read or
// change through the client's state goroutine (c.state.Do), which builds
// the requests and applies the responses.

// retryState is one server's backoff: failures in a row (streams that
// ended, or never started, before proving healthy) and when it may be
// tried again.
type retryState struct {
	fails  int
	at     time.Time
	logged string // the failure last logged, so a server failing the same way is logged once
}

// streamProven is how long a stream must stay open without a response to
// count as healthy: a SotW server may have nothing to send.
const streamProven = time.Second

// run keeps a stream up: it tries the servers in order of preference,
// skipping those backing off; a server whose stream fails before proving
// healthy backs off exponentially, with jitter, and the next one is tried
// meanwhile; while on a fallback server it watches for the first to come
// back. (grpc-go's xDS client resets backoff on the first response too.)
func (ch *channel) run(ctx context.Context) {
	defer close(ch.done)
	retry := make([]retryState, len(ch.servers))
	for ctx.Err() == nil {
		i, wait := next(retry)
		if wait > 0 {
			if !pause(ctx, wait) {
				return
			}
			continue
		}
		healthy, err := ch.session(ctx, i, retry[0].at)
		if ctx.Err() != nil {
			return
		}
		ch.ended(retry, i, healthy, err)
	}
}

// pause waits for d, or until ctx ends; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// next picks the server to try: the first not backing off, or (wait > 0)
// how long until one is.
func next(retry []retryState) (i int, wait time.Duration) {
	now := time.Now()
	wait = -1
	for i, r := range retry {
		d := r.at.Sub(now)
		if d <= 0 {
			return i, 0
		}
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return 0, wait
}

// backoff is how long a server that failed n times in a row waits:
// exponential from BackoffBase up to BackoffMax, with ±20% jitter.
func (ch *channel) backoff(n int) time.Duration {
	d := float64(ch.c.o.BackoffBase)
	for range n - 1 {
		d *= 1.6
		if d >= float64(ch.c.o.BackoffMax) {
			d = float64(ch.c.o.BackoffMax)
			break
		}
	}
	return time.Duration(d * (0.8 + 0.4*rand.Float64()))
}

// ended records how a session with server i ended: a healthy one may be
// resumed at once, a failed one backs off. It logs the failure, once per
// kind of failure of a server, and every loss of a healthy stream.
func (ch *channel) ended(retry []retryState, i int, healthy bool, err error) {
	now := time.Now()
	r := &retry[i]
	var log string
	if healthy {
		r.fails, r.at, r.logged = 0, time.Time{}, ""
		if err != nil {
			log = "lost"
		}
	} else {
		r.fails++
		r.at = now.Add(ch.backoff(r.fails))
		if msg := fmt.Sprint(err); msg != r.logged {
			r.logged, log = msg, "failed"
		}
	}
	ch.c.state.Do(func() { ch.down(healthy, err, now) })
	switch log {
	case "lost":
		ch.c.o.Logger.Warn("xDS stream lost", "server", ch.servers[i].URI, "error", err)
	case "failed":
		ch.c.o.Logger.Warn("xDS server unusable", "server", ch.servers[i].URI, "error", err,
			"retry_in", time.Until(r.at).Round(time.Millisecond))
	}
}

// session runs one stream to server i until it fails. healthy reports
// whether the stream proved itself before it ended (so backoff can reset).
// primaryAt is when the first server may be tried again.
func (ch *channel) session(ctx context.Context, i int, primaryAt time.Time) (healthy bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // (after cancel, deferred below: the goroutines end)
	defer cancel()
	srv := ch.servers[i]
	st, err := ch.tr.open(sctx, i, srv.Delta())
	if err != nil {
		return false, fmt.Errorf("%s: %w", srv.URI, err)
	}
	// Stream creation succeeds before the server answers: the stream is
	// open (does-not-exist timers run), but healthy only once it answers
	// or stays open for streamProven.
	if !ch.c.state.Do(func() { ch.opened(i) }) {
		return false, errClosed
	}
	var proven atomic.Bool
	back := make(chan struct{})
	if i > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch.watchPrimary(sctx, primaryAt, back)
		}()
	}
	recvErr := make(chan error, 1)
	go func() { recvErr <- ch.recvLoop(st, i, &proven) }()
	timer := time.NewTimer(streamProven)
	defer timer.Stop()
	ch.signal()
	for {
		var reqs []proto.Message
		if !ch.c.state.Do(func() { reqs = ch.requests(srv) }) {
			cancel()
			<-recvErr
			return proven.Load(), errClosed
		}
		for _, req := range reqs {
			if err := st.send(req); err != nil {
				if errors.Is(err, io.EOF) {
					// The stream has ended: a receive tells how.
					if rerr := <-recvErr; rerr != nil {
						err = rerr
					}
				} else {
					cancel()
					<-recvErr
				}
				return proven.Load(), fmt.Errorf("%s: %w", srv.URI, err)
			}
		}
		select {
		case <-ch.wake:
		case <-timer.C:
			ch.markHealthy(i, &proven)
		case err := <-recvErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return proven.Load(), fmt.Errorf("%s: %w", srv.URI, err)
			}
			return proven.Load(), err
		case <-back:
			cancel()
			<-recvErr
			return true, nil
		case <-ctx.Done():
			cancel()
			<-recvErr
			return proven.Load(), ctx.Err()
		}
	}
}

var errClosed = errors.New("client closed")

// markHealthy records that the open stream to server i has proved itself.
func (ch *channel) markHealthy(i int, proven *atomic.Bool) {
	if proven.CompareAndSwap(false, true) {
		ch.c.state.Do(func() { ch.proven(i) })
	}
}

// watchPrimary ends a session on a fallback server once the primary server
// is reachable again, so the channel returns to it.
func (ch *channel) watchPrimary(ctx context.Context, at time.Time, back chan struct{}) {
	// Not before the primary's backoff is over: it may accept connections
	// and fail every stream.
	if !pause(ctx, time.Until(at)) {
		return
	}
	if ch.tr.ready(ctx, 0) {
		close(back)
	}
}

// recvLoop receives responses until the stream ends: each is checked as
// far as it can be on its own here — user code (Options.Validate) runs
// here, never on the state goroutine — then applied there.
func (ch *channel) recvLoop(st adsStream, i int, proven *atomic.Bool) error {
	srv := ch.servers[i]
	for first := true; ; first = false {
		m, err := st.recv()
		if err != nil {
			return err
		}
		if first {
			ch.markHealthy(i, proven)
		}
		var ok bool
		switch r := m.(type) {
		case *discoveryv3.DiscoveryResponse:
			d := ch.c.decodeSotW(r)
			ok = ch.c.state.Do(func() { ch.handleSotW(r, d, srv) })
		case *discoveryv3.DeltaDiscoveryResponse:
			d := ch.c.decodeDelta(r)
			ok = ch.c.state.Do(func() { ch.handleDelta(r, d, srv) })
		}
		if !ok {
			return errClosed
		}
		ch.signal()
	}
}

// opened records that a stream to server i is open (on the state
// goroutine).
func (ch *channel) opened(i int) {
	ch.connected, ch.healthy = i, false
	ch.gen++
	sameServer := ch.versionsFrom == i
	ch.versionsFrom = i
	for _, t := range ch.types {
		t.newStream(sameServer)
	}
	ch.c.channelState(ch, true)
}

// proven records that the stream to server i has proved itself (on the
// state goroutine): what was retained through the outage goes.
func (ch *channel) proven(i int) {
	if ch.connected != i || ch.healthy {
		return
	}
	ch.healthy = true
	ch.forgetRetained()
	ch.c.o.Logger.Info("xDS stream up", "server", ch.servers[i].URI)
	ch.c.healthy(ch)
}

// down records that the stream ended (on the state goroutine).
func (ch *channel) down(healthy bool, err error, now time.Time) {
	was := ch.connected
	ch.connected, ch.healthy = -1, false
	if err != nil {
		ch.lastErr = err
	}
	if healthy {
		ch.downSince = now
	}
	if was >= 0 {
		ch.c.channelState(ch, false)
	}
}
