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
)

// Backup writes a consistent copy of the whole store file to w while the
// store keeps serving and applying: one read transaction sees one
// committed revision, which is returned. The copy is itself a store file
// (open it, Verify it, or Restore it).
func (s *Store) Backup(ctx context.Context, w io.Writer) (rev int64, err error) {
	if err := s.open(); err != nil {
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
	if err := guard(func() error { return walk(db, path) }); err != nil {
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

// BackupFormat implements store.Backuper.
func (s *Store) BackupFormat() string { return "bolt" }
