package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/resource"
)

// FollowDoesNotExist is how long get --follow waits for a referenced name
// before calling it missing, when the server does not say so itself
// (SotW route configurations and endpoints: docs/protocol.md §2.8).
const FollowDoesNotExist = 3 * time.Second

// FollowWait is the does-not-exist wait get --follow gives each name
// under --timeout: FollowDoesNotExist, or less when the timeout is
// short, so that a missing name one or two links down is still named as
// missing before the timeout ends the whole chain.
func FollowWait(timeout time.Duration) time.Duration {
	return min(FollowDoesNotExist, timeout/3)
}

// Chain is what get --follow prints: every resource a client with the
// given parameters resolves from the names asked for, in the order it
// meets them, each with the reference that led to it, and the references
// that lead nowhere.
type Chain struct {
	Time      string       `json:"time,omitempty"` // watch --follow
	Resources []ChainEntry `json:"resources"`
	Dangling  []string     `json:"dangling,omitempty"`
	// Unanswered names the references followed to names no word came
	// for (get --follow that ran out of time), as Dangling does.
	Unanswered []string `json:"unanswered,omitempty"`
}

// ChainEntry is one resource of a chain.
type ChainEntry struct {
	Result
	// From is the reference followed to it: "route r: virtual_hosts[0].routes[0].route.cluster".
	From string `json:"referenced_by,omitempty"`
}

type followKey struct{ typ, name string }

// chainWatcher watches every resource a chain reaches and resolves the
// chain from the latest word on each.
type chainWatcher struct {
	c       *client.Client
	roots   []followKey
	changed chan struct{} // a new word on some resource

	mu      sync.Mutex
	latest  map[followKey]client.Event
	watched map[followKey]bool
	cancels []client.CancelFunc
}

func newChainWatcher(c *client.Client, typ *resource.Type, names []string) *chainWatcher {
	w := &chainWatcher{c: c, changed: make(chan struct{}, 1),
		latest: map[followKey]client.Event{}, watched: map[followKey]bool{}}
	for _, n := range names {
		w.roots = append(w.roots, followKey{typ.URL, n})
	}
	return w
}

// close cancels every watch, waiting for the handlers to end.
func (w *chainWatcher) close() {
	w.mu.Lock()
	cancels := w.cancels
	w.mu.Unlock()
	for _, cancel := range cancels {
		<-cancel()
	}
}

func (w *chainWatcher) watch(ctx context.Context, ks []followKey) error {
	for _, k := range ks {
		w.mu.Lock()
		seen := w.watched[k]
		w.watched[k] = true
		w.mu.Unlock()
		if seen {
			continue
		}
		cancel, err := w.c.Watch(ctx, k.typ, k.name, func(e client.Event) {
			w.mu.Lock()
			w.latest[k] = e
			w.mu.Unlock()
			select {
			case w.changed <- struct{}{}:
			default:
			}
		})
		if err != nil {
			return &NameError{Name: k.name, Err: err}
		}
		w.mu.Lock()
		w.cancels = append(w.cancels, cancel)
		w.mu.Unlock()
	}
	return nil
}

// resolve walks the chain from the roots over the latest words: the
// chain so far, how many names reached have no word yet, and the names
// reached that are not watched yet.
func (w *chainWatcher) resolve() (ch Chain, pending int, unwatched []followKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[followKey]bool{}
	type step struct {
		k    followKey
		from string
	}
	queue := make([]step, 0, len(w.roots))
	for _, k := range w.roots {
		queue = append(queue, step{k, ""})
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if seen[s.k] {
			continue
		}
		seen[s.k] = true
		if !w.watched[s.k] {
			unwatched = append(unwatched, s.k)
		}
		e, ok := w.latest[s.k]
		if !ok {
			pending++
			what := fmt.Sprintf("%s %s", refs.Kind(s.k.typ), s.k.name)
			if s.from != "" {
				what = s.from + " → " + what
			}
			ch.Unanswered = append(ch.Unanswered, what)
			continue
		}
		r := Render(e, resource.ForURL(s.k.typ))
		r.Event = ""
		ch.Resources = append(ch.Resources, ChainEntry{Result: r, From: s.from})
		if e.Kind != client.Updated {
			why := r.Status
			if r.Error != "" {
				why = r.Error
			}
			what := fmt.Sprintf("%s %s: %s", refs.Kind(s.k.typ), s.k.name, why)
			if s.from != "" {
				what = s.from + " → " + what
			}
			ch.Dangling = append(ch.Dangling, what)
			continue
		}
		m, err := e.Message()
		if err != nil {
			continue
		}
		for _, ref := range refs.Of(m) {
			queue = append(queue, step{followKey{ref.Type, ref.Name}, fmt.Sprintf("%s %s: %s", refs.Kind(s.k.typ), s.k.name, ref.Path)})
		}
	}
	return ch, pending, unwatched
}

// next resolves the chain, watching what it reaches, until every name in
// it has had a word; it returns early with pending > 0 when ctx ends.
func (w *chainWatcher) next(ctx context.Context) (Chain, int, error) {
	for {
		ch, pending, unwatched := w.resolve()
		if len(unwatched) > 0 {
			if err := w.watch(ctx, unwatched); err != nil {
				return ch, pending, err
			}
			continue
		}
		if pending == 0 {
			return ch, 0, nil
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return ch, pending, nil
		}
	}
}

// Follow resolves the chain from each name, waiting at most timeout for
// every name in it to be answered — or FastFail, when the first name's
// server fails every connection. c's does-not-exist timeout should be at
// most FollowDoesNotExist. hint explains an unreachable server
// (NotReached). The chain may hold dangling references; the error says why
// it could not be resolved (a *NameError for a name c refuses).
func Follow(c *client.Client, typ *resource.Type, names []string, timeout time.Duration, hint func(server string) string) (Chain, error) {
	w := newChainWatcher(c, typ, names)
	defer w.close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// A server that cannot be reached fails get within about a second.
	var failFast sync.WaitGroup
	failFast.Add(1)
	go func() {
		defer failFast.Done()
		t := time.NewTicker(checkTick)
		defer t.Stop()
		started := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if time.Since(started) >= FastFail && Failing(c, names[0]) {
				cancel()
				return
			}
		}
	}()
	defer failFast.Wait()
	defer cancel()
	ch, pending, err := w.next(ctx)
	if err != nil {
		return ch, err
	}
	if pending > 0 {
		if why := NotReached(c, names[0], timeout, hint); why != "" {
			return ch, errors.New(why)
		}
		return ch, fmt.Errorf("the chain was not resolved within --timeout %v: no answer for %s", timeout, strings.Join(ch.Unanswered, "; "))
	}
	return ch, nil
}

// WatchChain calls emit with the chain, stamped with the time, at start
// and whenever it changes, until ctx ends or emit fails. A chain waiting
// for answers is not emitted.
func WatchChain(ctx context.Context, c *client.Client, typ *resource.Type, names []string, emit func(Chain) error) error {
	w := newChainWatcher(c, typ, names)
	defer w.close()
	var last []byte
	for ctx.Err() == nil {
		ch, pending, err := w.next(ctx)
		if err != nil {
			return err
		}
		if pending > 0 {
			continue
		}
		// The emitted form without the time says whether it changed.
		js, err := json.Marshal(ch)
		if err != nil {
			return err
		}
		if string(js) != string(last) {
			last = js
			ch.Time = time.Now().UTC().Format(time.RFC3339Nano)
			if err := emit(ch); err != nil {
				return err
			}
		}
		select {
		case <-w.changed:
			// Words come a response at a time: let a burst settle.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
			}
		case <-ctx.Done():
		}
	}
	return nil
}
