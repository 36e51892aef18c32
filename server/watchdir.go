package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/store"
)

// DirWatcher keeps a store in step with a directory of authoring files
// (xdsd serve --watch DIR): the directory is applied as one batch at start
// and on every change. A document removed from the directory deletes the
// variant it defined, and nothing else; an invalid directory changes
// nothing and is reported, and the last good state keeps being served.
type DirWatcher struct {
	Store    store.Store
	Dir      string
	Interval time.Duration // polling interval; default 500ms
	Logger   *slog.Logger
	// Applied, when set, is told the outcome of every attempt to apply a
	// change of the directory.
	Applied func(store.Result, error)

	owned map[resource.Key]bool // variants the directory defined when last applied
	sum   [32]byte              // contents last tried
	tried bool
}

// Sync applies the directory if it changed since the last Sync. It reports
// whether it applied anything, and any error.
func (w *DirWatcher) Sync(ctx context.Context) (bool, error) {
	files, err := resource.SourceFiles(w.Dir)
	if err != nil {
		return false, err
	}
	h := sha256.New()
	for _, f := range files {
		io.WriteString(h, f)
		h.Write([]byte{0})
		data, err := os.ReadFile(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed while we looked; the next round sees it
			}
			return false, err
		}
		h.Write(data)
		h.Write([]byte{0})
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if w.tried && sum == w.sum {
		return false, nil
	}
	w.tried, w.sum = true, sum
	docs, err := resource.Load(w.Dir)
	if err != nil {
		return false, err
	}
	var b store.Batch
	now := map[resource.Key]bool{}
	groups := map[[2]string]bool{}
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
		k := d.Variant.Key()
		now[k] = true
		groups[[2]string{k.Type, k.Name}] = true
	}
	for k := range w.owned {
		// A resource still in the directory has its variant set replaced
		// by the puts; only resources gone from it need deleting.
		if !now[k] && !groups[[2]string{k.Type, k.Name}] {
			b.Deletes = append(b.Deletes, store.Delete{Type: k.Type, Name: k.Name, Constraints: k.Constraints})
		}
	}
	res, err := w.Store.Apply(ctx, b)
	if w.Applied != nil {
		w.Applied(res, err)
	}
	if err != nil {
		return false, err
	}
	w.owned = now
	return true, nil
}

// Run syncs the directory every Interval until ctx ends. Errors after the
// first sync are logged, not returned: a bad edit must not take the server
// down.
func (w *DirWatcher) Run(ctx context.Context) {
	if w.Interval <= 0 {
		w.Interval = 500 * time.Millisecond
	}
	if w.Logger == nil {
		w.Logger = slog.Default()
	}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		applied, err := w.Sync(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			w.Logger.Error("watched directory not applied; still serving the last good state", "dir", w.Dir, "error", err)
		case applied:
			w.Logger.Info("watched directory applied", "dir", w.Dir, "revision", w.Store.Rev())
		}
	}
}
