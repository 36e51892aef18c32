package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/xdsd/xdsd/internal/store"
)

// The Store: its buckets, options, Open and Close. What Open checks of the
// file is in check.go, its upgrades in format.go.

// DefaultHistory is how many revisions are kept: their records and undo
// data (history, rollback) and their change log (watchers resuming from a
// revision; older ones get the whole state). xdsd serve --history.
const DefaultHistory = 1000

var (
	bucketMeta = []byte("meta")
	bucketRes  = []byte("resources")
	bucketLog  = []byte("log")
	// bucketUser holds store.Batch.Meta: the writers' metadata, apart from
	// the store's own in bucketMeta. Files made before it existed get it
	// on open; the format is unchanged.
	bucketUser = []byte("batchmeta")
	// bucketRevs holds the revision records (store.Revision, as JSON) by
	// revision, and bucketUndo, under revision + resource key, each
	// variant a revision replaced or removed: the store's history. Both
	// are trimmed with the log. Files made before they existed get them
	// on open, with their history starting at that revision (keyHistFrom).
	bucketRevs = []byte("revs")
	bucketUndo = []byte("undo")
	// bucketBody holds, under the same key as its record in bucketRes,
	// the body of each variant written since format 2 (store.EncodeHead):
	// bbolt is handed the payloads a batch decoded, as they are, instead
	// of records that copy them, so that a large batch is not held twice
	// before its commit. Records of format 1 keep their body inside and
	// are read as they are.
	bucketBody  = []byte("bodies")
	keyHistFrom = []byte("histfrom")
	keyRev      = []byte("rev")
	keyCompact  = []byte("compacted")
	keyFormat   = []byte("format")
	// keyPrewritten names the revision whose bodies a large Apply is writing
	// ahead of its commit (see Apply).
	keyPrewritten = []byte("staged") // (its name in files, from before "prewrite")
)

// Options tune a Store.
type Options struct {
	// History is how many revisions of change history to keep
	// (DefaultHistory when zero).
	History int
	// LockTimeout bounds the wait for another process holding the file
	// (one second when zero).
	LockTimeout time.Duration
	// PrewriteBytes is the size of payloads past which a batch is written
	// in steps (see Apply), and the size of each step: DefaultPrewriteBytes
	// when zero; negative for one transaction whatever the size.
	PrewriteBytes int
	// PageSize is the page size of a new file (DefaultPageSize when
	// zero; at most 64 KiB); a file keeps the page size it was made with.
	PageSize int
	// Preload keeps the current variants that Open decodes to check the
	// file for the first Changes from the start (a server loading its
	// state), which then need not read and check them a second time: a
	// restart on a million variants read them twice. Without it, Open
	// keeps nothing (a command that opens the file for something else
	// would hold them for nothing).
	Preload bool
}

// DefaultPageSize is Options.PageSize when it is zero. bbolt writes a
// transaction page by page (a call each), and a page holds two payloads
// of 1.5 KB at 4 KiB: 100,000 clusters took 37,000 writes. At 16 KiB an
// apply of them costs the server 5-8 % less CPU and its commit a fifth
// less time; a commit of one resource, which writes a page of each
// bucket it touches, 0.67 ms instead of 0.56 (64 KiB: 0.96 ms, for a
// little more on large batches). BENCHMARKS.md, "Large batches".
const DefaultPageSize = 16 << 10

// DefaultPrewriteBytes is Options.PrewriteBytes when it is zero.
const DefaultPrewriteBytes = 16 << 20

// Store is a store.Store kept in a bbolt file.
type Store struct {
	db            *bbolt.DB
	history       int
	prewriteBytes int // 0: never

	mu     sync.Mutex // serializes Apply, guards rev, last and notify
	rev    int64
	last   store.ChangeSet // what the last Apply changed, at rev
	notify store.Notifier
	closed bool
	// loaded is what Open decoded, for the first Changes from the start
	// (Options.Preload); nil once taken.
	loaded *store.ChangeSet
}

// Open opens or creates the store file at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	// A path in a directory that is not there is a mistyped path, not a
	// damaged store.
	if dir := filepath.Dir(path); dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("store %s: directory %s does not exist: create it (mkdir -p %s), or give a path in an existing directory", path, dir, dir)
		}
	}
	// An existing empty file is no store: opening it would make an empty
	// one, and a server would tell every full-state client to delete
	// everything it has.
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		return nil, fmt.Errorf("store %s: the file is empty (0 bytes), not a store: restore a backup, or remove the file to start an empty store", path)
	}
	if err := checkMetaPages(path); err != nil {
		return nil, fmt.Errorf("store %s: damaged: %w", path, err)
	}
	var db *bbolt.DB
	err := guard(func() (err error) {
		// A large initial map (address space, not memory) spares a
		// large batch bbolt's remapping as the file grows, which copies
		// every page the transaction has touched out of the old map.
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.LockTimeout, InitialMmapSize: initialMmap, PageSize: opts.PageSize})
		return err
	})
	if err != nil {
		if errors.Is(err, bberrors.ErrTimeout) {
			return nil, fmt.Errorf("store %s: in use by another process", path)
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("store %s: %w (this user may not read and write the file, or create it in its directory)", path, err)
		}
		return nil, fmt.Errorf("store %s: %w (not a store, or a damaged one: restore a backup)", path, err)
	}
	// Read the whole file once, on this goroutine, under guard: a damaged
	// page (bbolt asserts on it, or it points outside the file) is
	// refused here, with what is wrong, rather than crash the process or
	// serve altered data later. (bbolt's Tx.Check walks the file on a
	// goroutine of its own, where a fault could not be caught.)
	var loaded *store.ChangeSet
	if opts.Preload {
		loaded = &store.ChangeSet{Reset: true}
	}
	if err := guard(func() error { return walk(db, path, loaded, false) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: damaged: %w (restore a backup)", path, err)
	}
	if opts.PrewriteBytes == 0 {
		opts.PrewriteBytes = DefaultPrewriteBytes
	}
	s := &Store{db: db, history: opts.History, prewriteBytes: max(opts.PrewriteBytes, 0), loaded: loaded}
	err = guard(func() error { return db.Update(s.initTx) })
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (s *Store) open() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	return nil
}

// initialMmap is the size of the file's first memory map.
const initialMmap = 1 << 30

// Meta implements store.Store.
func (s *Store) Meta(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	var v []byte
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			// bbolt's bytes live only as long as the transaction.
			if b := tx.Bucket(bucketUser).Get([]byte(key)); len(b) > 0 {
				v = bytes.Clone(b)
			}
			return nil
		})
	})
	return v, err
}

// Updated implements store.Store.
func (s *Store) Updated() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notify.C()
}

// Rev implements store.Store.
func (s *Store) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.notify.Wake()
	return s.db.Close()
}
