package origin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/files"
)

// DirWatcher keeps a store in step with a directory of authoring files
// (xdsd serve --watch DIR): the directory is applied as one batch at start
// and on every change. A document removed from the directory deletes the
// variant it defined, and nothing else, even when it was removed while no
// watcher ran: what the directory defined is recorded in the store itself,
// in the batch that makes it so (see OwnershipKey). An invalid directory
// changes nothing and is reported, and the last good state keeps being
// served.
//
// Two watchers of different directories keep separate records. A resource
// that both define is one resource: whichever directory last changed it
// wins, and removing it from either deletes it.
type DirWatcher struct {
	Store    store.Store
	Dir      string
	Interval time.Duration // polling interval; default 500ms
	Logger   *slog.Logger
	// Applied, when set, is told the outcome of every attempt to apply a
	// change of the directory: a batch applied, or why the directory could
	// not be (invalid files, a store failure).
	Applied func(store.Result, error)

	key   string   // OwnershipKey(Dir), once known
	sum   [32]byte // contents last applied, or last found invalid
	tried bool
}

// OwnershipKey is the store metadata key (store.Batch.Meta) under which a
// DirWatcher records what the directory dir defined: "watch:" and dir's
// absolute path. Symbolic links are not resolved, so a directory swapped
// by retargeting a link keeps its record.
func OwnershipKey(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("watched directory %s: %w", dir, err)
	}
	return "watch:" + abs, nil
}

// ownership is the record of what a directory defined, as stored: JSON, so
// that whoever inspects a store file can read it, and its own types, so
// that it does not change with resource.Key.
type ownership struct {
	Format int        `json:"format"`
	Keys   []ownedKey `json:"keys"` // sorted
}

type ownedKey struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Constraints string `json:"constraints,omitempty"` // canonical key
	// File is the file that defines the variant (absent in records
	// written before it was kept).
	File string `json:"file,omitempty"`
}

const ownershipFormat = 1

func encodeOwnership(keys map[resource.Key]string) []byte {
	o := ownership{Format: ownershipFormat, Keys: make([]ownedKey, 0, len(keys))}
	for k, file := range keys {
		o.Keys = append(o.Keys, ownedKey{Type: k.Type, Name: k.Name, Constraints: k.Constraints, File: file})
	}
	sort.Slice(o.Keys, func(i, j int) bool {
		a, b := o.Keys[i], o.Keys[j]
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Constraints < b.Constraints
	})
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return b
}

func decodeOwnership(b []byte) (map[resource.Key]string, error) {
	if b == nil {
		return nil, nil // never synced into this store
	}
	var o ownership
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	if o.Format != ownershipFormat {
		return nil, fmt.Errorf("format %d, this xdsd reads %d", o.Format, ownershipFormat)
	}
	m := make(map[resource.Key]string, len(o.Keys))
	for _, k := range o.Keys {
		m[resource.Key{Type: k.Type, Name: k.Name, Constraints: k.Constraints}] = k.File
	}
	return m, nil
}

// Owned says which files of the watched directory dir define which
// variants, as the store's record says. A change made behind the
// directory's back (applying or deleting such a resource through the API)
// would be undone or contradicted by the next change of the directory,
// which replaces the whole variant set of every resource it defines: so
// the admin API refuses it unless forced.
func Owned(ctx context.Context, st store.Store, dir string) (map[resource.Key]string, error) {
	key, err := OwnershipKey(dir)
	if err != nil {
		return nil, err
	}
	rec, err := st.Meta(ctx, key)
	if err != nil {
		return nil, err
	}
	owned, err := decodeOwnership(rec)
	if err != nil {
		return nil, fmt.Errorf("the store's record of what %s defined (metadata %q): %w", dir, key, err)
	}
	for k, file := range owned {
		if file == "" {
			owned[k] = dir // an older record: the directory, at least
		}
	}
	return owned, nil
}

// Sync applies the directory if it changed since the last Sync. It reports
// whether it applied anything, and any error. The resources the directory
// defines and the record of them land in one batch, so the record never
// disagrees with the store.
func (w *DirWatcher) Sync(ctx context.Context) (bool, error) {
	res, applied, err := w.sync(ctx)
	if w.Applied != nil && (applied || err != nil) {
		w.Applied(res, err)
	}
	return applied, err
}

// sync is Sync without telling Applied.
func (w *DirWatcher) sync(ctx context.Context) (store.Result, bool, error) {
	if w.key == "" {
		k, err := OwnershipKey(w.Dir)
		if err != nil {
			return store.Result{}, false, err
		}
		w.key = k
	}
	paths, err := files.List(w.Dir)
	if err != nil {
		return store.Result{}, false, err
	}
	h := sha256.New()
	for _, f := range paths {
		io.WriteString(h, f)
		h.Write([]byte{0})
		data, err := files.Read(f)
		if errors.Is(err, files.ErrNotRegular) {
			// Load reports it, naming the file; it is not retried until
			// the directory changes.
			h.Write([]byte("not regular"))
			h.Write([]byte{0})
			continue
		}
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // removed while we looked; the next round sees it
			}
			return store.Result{}, false, err
		}
		h.Write(data)
		h.Write([]byte{0})
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	if w.tried && sum == w.sum {
		return store.Result{}, false, nil
	}
	docs, err := files.Load(w.Dir)
	if err != nil {
		// Invalid content is not retried until it changes; a failure of
		// the store below is, on the next round.
		w.tried, w.sum = true, sum
		return store.Result{}, false, err
	}
	var res store.Result
	for try := 1; ; try++ {
		res, err = w.apply(ctx, docs)
		if err == nil || !errors.Is(err, store.ErrConflict) || try == watchTries {
			break
		}
		// The store moved on between the check and the write: look
		// again (a stage may have landed meanwhile).
	}
	if err != nil {
		if be := (*store.BatchError)(nil); errors.As(err, &be) {
			w.tried, w.sum = true, sum
		}
		return store.Result{}, false, err
	}
	w.tried, w.sum = true, sum
	return res, true, nil
}

// watchTries bounds how often a directory's write whose store revision
// moved on between its check and its write is tried again in one round;
// the next round tries anew.
const watchTries = 3

// StagedError is the refusal to apply a watched directory while a
// revision is staged (docs/rollouts.md): it is applied once the staged
// revision is promoted or aborted.
type StagedError struct {
	Dir    string
	Rev    int64
	Canary string
}

func (e *StagedError) Error() string {
	return fmt.Sprintf("%s is not applied while revision %d is staged for the canary %s: run `xdsd rollout promote %d` or `xdsd rollout abort %d`, and the directory is applied next",
		e.Dir, e.Rev, e.Canary, e.Rev, e.Rev)
}

// apply writes the directory's documents docs, with the record of what it
// defines, only at a revision at which nothing is staged: the check and
// the write are one (store.Batch.IfRev), so a canary apply committed
// meanwhile through another replica is never written over. A write
// refused because the store moved on is a store.ErrConflict.
func (w *DirWatcher) apply(ctx context.Context, docs []*resource.Document) (store.Result, error) {
	// While a revision is staged nothing else commits (docs/rollouts.md):
	// the directory is read again each round, and applied once the
	// staged revision is promoted or aborted.
	staged, isStaged, at, err := store.StagedAt(ctx, w.Store, w.Store.Rev())
	if err != nil {
		return store.Result{}, err
	}
	if isStaged {
		return store.Result{}, &StagedError{Dir: w.Dir, Rev: staged.Rev, Canary: staged.Audit.Stage.Canary}
	}
	rec, err := w.Store.Meta(ctx, w.key)
	if err != nil {
		return store.Result{}, fmt.Errorf("reading what %s defined from the store: %w", w.Dir, err)
	}
	owned, err := decodeOwnership(rec)
	if err != nil {
		return store.Result{}, fmt.Errorf("the store's record of what %s defined (metadata %q): %w", w.Dir, w.key, err)
	}
	b := store.Batch{Audit: store.Audit{Via: "watch " + w.Dir}, IfRev: at}
	now := map[resource.Key]string{} // → the file defining it
	groups := map[[2]string]bool{}
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
		k := d.Variant.Key()
		now[k] = d.Source
		groups[[2]string{k.Type, k.Name}] = true
	}
	for k := range owned {
		// A resource still in the directory has its variant set replaced
		// by the puts; only resources gone from it need deleting. Nothing
		// the directory did not define is touched: resources applied
		// through the API stay.
		if _, ok := now[k]; !ok && !groups[[2]string{k.Type, k.Name}] {
			b.Deletes = append(b.Deletes, store.Delete{Type: k.Type, Name: k.Name, Constraints: k.Constraints})
		}
	}
	if next := encodeOwnership(now); !bytes.Equal(next, rec) {
		b.Meta = map[string][]byte{w.key: next}
	}
	return w.Store.Apply(ctx, b)
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
