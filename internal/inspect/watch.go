package inspect

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/resource"
)

// UnreachableInterval is how often watch repeats that a server is still
// unreachable.
const UnreachableInterval = 5 * time.Second

// Watch watches the names and calls emit with every update and removal,
// stamped with the time, until ctx ends; meanwhile it says on w when a
// server cannot be reached (ReportUnreachable). emit is called one event at
// a time. Its error is a *NameError for a name c refuses.
func Watch(ctx context.Context, c *client.Client, computed map[string]string, typ *resource.Type, names []string, emit func(Result), w io.Writer) error {
	var mu sync.Mutex
	shown := map[string]*resource.Variant{} // what was last emitted as updated, by name
	for _, n := range names {
		cancel, err := watchName(ctx, c, computed, typ.URL, n, func(e client.Event) {
			mu.Lock()
			defer mu.Unlock()
			// A SotW response carries every resource of a type: emit an
			// update only when this resource (or the variant of it that
			// applies) changed.
			if e.Kind == client.Updated {
				if prev := shown[e.Name]; prev != nil && prev.SameContent(e.Variant) {
					return
				}
				shown[e.Name] = e.Variant
			} else {
				delete(shown, e.Name)
			}
			r := Render(e, typ)
			r.Time = time.Now().UTC().Format(time.RFC3339Nano)
			emit(r)
		})
		if err != nil {
			return err
		}
		defer cancel()
	}
	ReportUnreachable(ctx, c, w, UnreachableInterval)
	return nil
}

// ReportUnreachable says on w, until ctx ends, when an upstream has never
// been reached or is down, and again every interval while it stays so:
// watch keeps retrying, visibly, rather than going quiet after one
// warning.
func ReportUnreachable(ctx context.Context, c *client.Client, w io.Writer, interval time.Duration) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := map[string]time.Time{} // servers → when last reported
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, u := range c.Upstreams() {
			key := strings.Join(u.Servers, ", ")
			if u.Connected != "" || u.LastError == "" {
				delete(last, key)
				continue
			}
			if at, ok := last[key]; ok && time.Since(at) < interval {
				continue
			}
			last[key] = time.Now()
			fmt.Fprintf(w, "xdsd watch: cannot reach xDS server %s: %s; retrying (down since %s)\n", key,
				strings.TrimPrefix(u.LastError, key+": "), u.DownSince)
		}
	}
}
