package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/resource"
)

// followDoesNotExist is how long get --follow waits for a referenced name
// before calling it missing, when the server does not say so itself
// (SotW route configurations and endpoints: docs/protocol.md §2.8).
const followDoesNotExist = 3 * time.Second

// Chain is what get --follow prints: every resource a client with the
// given parameters resolves from the names asked for, in the order it
// meets them, each with the reference that led to it, and the references
// that lead nowhere.
type Chain struct {
	Resources []ChainEntry `json:"resources"`
	Dangling  []string     `json:"dangling,omitempty"`
}

// ChainEntry is one resource of a chain.
type ChainEntry struct {
	Result
	// From is the reference followed to it: "route r: virtual_hosts[0].routes[0].route.cluster".
	From string `json:"referenced_by,omitempty"`
}

type followKey struct{ typ, name string }

// runFollow resolves the chain from each name and prints it as one
// document; a dangling reference (or a name not had) fails it.
func runFollow(f *getFlags, typ *resource.Type, names []string, stdout, stderr io.Writer) error {
	dne := min(followDoesNotExist, f.timeout)
	c, err := startClient(f, typ, names, dne, clientLogger(stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	type answer struct {
		key followKey
		ev  client.Event
	}
	var (
		mu      sync.Mutex
		answers = make(chan answer, 64)
		seen    = map[followKey]bool{}
		chain   Chain
		pending int
		from    = map[followKey]string{}
		cancels []client.CancelFunc
	)
	ctx := context.Background()
	stop := make(chan struct{})
	watch := func(k followKey, ref string) error {
		if seen[k] {
			return nil
		}
		seen[k], from[k] = true, ref
		pending++
		once := sync.Once{}
		cancel, err := c.Watch(ctx, k.typ, k.name, func(e client.Event) {
			once.Do(func() {
				select {
				case answers <- answer{k, e}:
				case <-stop:
				}
			})
		})
		if err != nil {
			return usagef("%s: %v", k.name, err)
		}
		mu.Lock()
		cancels = append(cancels, cancel)
		mu.Unlock()
		return nil
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, cancel := range cancels {
			<-cancel()
		}
	}()
	defer close(stop) // runs first: a handler blocked on answers returns

	for _, n := range names {
		if err := watch(followKey{typ.URL, n}, ""); err != nil {
			return err
		}
	}
	deadline := time.NewTimer(f.timeout)
	defer deadline.Stop()
	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	started := time.Now()
	for pending > 0 {
		select {
		case a := <-answers:
			pending--
			t := resource.ForURL(a.key.typ)
			r := render(a.ev, t)
			r.Event = ""
			e := ChainEntry{Result: r, From: from[a.key]}
			chain.Resources = append(chain.Resources, e)
			if r.Status != "" || r.Error != "" {
				why := r.Status
				if r.Error != "" {
					why = r.Error
				}
				if e.From != "" {
					chain.Dangling = append(chain.Dangling, fmt.Sprintf("%s → %s %s: %s", e.From, refs.Kind(a.key.typ), a.key.name, why))
				} else {
					chain.Dangling = append(chain.Dangling, fmt.Sprintf("%s %s: %s", refs.Kind(a.key.typ), a.key.name, why))
				}
				continue
			}
			m, err := a.ev.Message()
			if err != nil {
				continue
			}
			for _, ref := range refs.Of(m) {
				via := fmt.Sprintf("%s %s: %s", refs.Kind(a.key.typ), a.key.name, ref.Path)
				if err := watch(followKey{ref.Type, ref.Name}, via); err != nil {
					return err
				}
			}
		case <-check.C:
			if time.Since(started) < fastFail {
				continue
			}
			for k := range seen {
				if failing(c, k.name) {
					return errors.New(notReached(c, k.name, f.timeout))
				}
			}
		case <-deadline.C:
			return fmt.Errorf("the chain was not resolved within --timeout %v: %d names unanswered", f.timeout, pending)
		}
	}
	if err := printJSONOrYAML(stdout, f.output, chain); err != nil {
		return err
	}
	if len(chain.Dangling) > 0 {
		return fmt.Errorf("%s: %s", plural(len(chain.Dangling), "reference"), strings.Join(chain.Dangling, "; "))
	}
	return nil
}
