package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/xdsd/xdsd/internal/store"
)

// Backup writes a consistent copy of the whole store file to w while the
// store keeps serving and applying: one read transaction sees one
// committed revision, which is returned. The copy is itself a store file
// (open it, Verify it, or Restore it).
func (s *Store) Backup(ctx context.Context, w io.Writer) (rev int64, err error) {
	// A copy of a damaged file is no backup: verify it first, so that a
	// damaged store fails the backup before a byte is written.
	if err := s.Check(ctx); err != nil {
		return 0, err
	}
	err = guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			rev = int64(getU64(tx.Bucket(bucketMeta).Get(keyRev)))
			_, err := tx.WriteTo(&ctxWriter{ctx: ctx, w: w})
			return err
		})
	})
	return rev, err
}

// Check verifies the live file as Open does at start: both meta pages,
// every page reachable, every record and body decoding and passing its
// checksum. It reads in a read transaction, beside applies; only the two
// meta pages are read under the lock that serializes commits, so that a
// commit in progress is never mistaken for damage. Pages overwritten
// behind the process's back show here (the file is mapped shared), not
// only at the next start: a server runs it every --verify-interval and
// before each backup.
func (s *Store) Check(ctx context.Context) error {
	if err := s.open(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	path := s.db.Path()
	s.mu.Lock()
	err := checkMetaPages(path)
	s.mu.Unlock()
	if err == nil {
		err = guard(func() error { return walk(s.db, path, nil, true) })
	}
	if err != nil {
		return fmt.Errorf("store %s: damaged: %w (restore a backup: xdsd restore)", path, err)
	}
	return nil
}

// ctxWriter stops a long copy when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Verify checks a store file without changing it — both meta pages, its
// length, every page, every variant and history record against its
// checksum — and returns its revision.
func Verify(path string) (rev int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Size() == 0 {
		return 0, fmt.Errorf("%s: the file is empty (0 bytes), not a store", path)
	}
	if err := checkMetaPages(path); err != nil {
		return 0, fmt.Errorf("%s: damaged: %w", path, err)
	}
	var db *bbolt.DB
	err = guard(func() (err error) {
		db, err = bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w (not a store, or a damaged one)", path, err)
	}
	defer db.Close()
	if err := guard(func() error { return walk(db, path, nil, true) }); err != nil {
		return 0, fmt.Errorf("%s: damaged: %w", path, err)
	}
	err = guard(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil || tx.Bucket(bucketRes) == nil {
				return errors.New("not an xdsd store (no resources)")
			}
			rev = int64(getU64(meta.Get(keyRev)))
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return rev, nil
}

// Restore replaces the store file at path with the backup at from, after
// verifying the backup. It is done offline: a store file in use by a
// running server is refused. The file it replaces, if any, is kept beside
// it as PATH.replaced-TIME, and its name returned.
func Restore(from, path string) (rev int64, kept string, err error) {
	if rev, err = Verify(from); err != nil {
		return 0, "", fmt.Errorf("the backup is not usable: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		// bbolt's file lock says whether a process has the store open.
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 500 * time.Millisecond, ReadOnly: true})
		if errors.Is(err, bberrors.ErrTimeout) {
			return 0, "", fmt.Errorf("store %s is in use by another process: stop the server first (restore is done offline)", path)
		}
		if err == nil {
			db.Close()
		}
		// A damaged file is what a restore is for: replace it anyway.
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".restore-*")
	if err != nil {
		return 0, "", err
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(from)
	if err != nil {
		tmp.Close()
		return 0, "", err
	}
	_, err = io.Copy(tmp, src)
	src.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", fmt.Errorf("copying the backup: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		kept = fmt.Sprintf("%s.replaced-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, kept); err != nil {
			return 0, "", err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, kept, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // the renames are durable
		d.Close()
	}
	return rev, kept, nil
}

// Export writes, to w, a store file holding the state of any store at its
// current revision — the variants with their versions, and the revision
// itself — so that a store without files of its own (etcd) is backed up
// in the same form as bolt, verified by Verify and restored by
// RestoreInto. It has no history before that revision.
func Export(ctx context.Context, s store.Store, w io.Writer) (rev int64, err error) {
	rev = s.Rev()
	vs, err := s.StateAt(ctx, rev, store.Filter{})
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "xdsd-export")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "snapshot.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	st := &Store{db: db, history: DefaultHistory}
	err = db.Update(func(tx *bbolt.Tx) error {
		if err := st.initTx(tx); err != nil {
			return err
		}
		res, bodies := tx.Bucket(bucketRes), tx.Bucket(bucketBody)
		for _, v := range vs {
			if err := putVariant(res, bodies, resKey(v.Key()), v, u64(uint64(rev)), false); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyRev, u64(uint64(rev))); err != nil {
			return err
		}
		// History starts here; the log holds nothing older (a watcher
		// resuming from before gets the whole state).
		if err := meta.Put(keyHistFrom, u64(uint64(rev))); err != nil {
			return err
		}
		return meta.Put(keyCompact, u64(uint64(rev)))
	})
	if err == nil {
		err = db.View(func(tx *bbolt.Tx) error {
			_, err := tx.WriteTo(&ctxWriter{ctx: ctx, w: w})
			return err
		})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return rev, err
}

// RestoreInto makes a store's state that of the backup file at from,
// after verifying it, as one batch: every resource of the backup put
// back, every other one deleted. It is how a store without files (etcd)
// is restored; its revision moves on, so the versions are new ones.
func RestoreInto(ctx context.Context, from string, s store.Store) (backupRev int64, res store.Result, err error) {
	if backupRev, err = Verify(from); err != nil {
		return 0, store.Result{}, fmt.Errorf("the backup is not usable: %w", err)
	}
	b, err := Open(from, Options{})
	if err != nil {
		return 0, store.Result{}, err
	}
	old, err := b.StateAt(ctx, backupRev, store.Filter{})
	b.Close()
	if err != nil {
		return 0, store.Result{}, err
	}
	cur := s.Rev()
	now, err := s.StateAt(ctx, cur, store.Filter{})
	if err != nil {
		return 0, store.Result{}, err
	}
	batch := store.StateBatch(old, now)
	batch.IfRev = cur
	batch.Audit = store.Audit{Via: fmt.Sprintf("restore of a backup at revision %d", backupRev)}
	res, err = s.Apply(ctx, batch)
	return backupRev, res, err
}
