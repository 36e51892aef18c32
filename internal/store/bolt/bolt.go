package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// DefaultHistory is how many revisions of change history are kept for
// watchers resuming from a revision; older ones get the whole state.
const DefaultHistory = 10000

var (
	bucketMeta = []byte("meta")
	bucketRes  = []byte("resources")
	bucketLog  = []byte("log")
	// bucketUser holds store.Batch.Meta: the writers' metadata, apart from
	// the store's own in bucketMeta. Files made before it existed get it
	// on open; the format is unchanged.
	bucketUser = []byte("batchmeta")
	keyRev     = []byte("rev")
	keyCompact = []byte("compacted")
	keyFormat  = []byte("format")
)

const format = 1

// Options tune a Store.
type Options struct {
	// History is how many revisions of change history to keep
	// (DefaultHistory when zero).
	History int
	// LockTimeout bounds the wait for another process holding the file
	// (one second when zero).
	LockTimeout time.Duration
}

// Store is a store.Store kept in a bbolt file.
type Store struct {
	db      *bbolt.DB
	history int

	mu     sync.Mutex // serializes Apply, guards rev, last and notify
	rev    int64
	last   store.ChangeSet // what the last Apply changed, at rev
	notify store.Notifier
	closed bool
}

// Open opens or creates the store file at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.History <= 0 {
		opts.History = DefaultHistory
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
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
		db, err = bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.LockTimeout, InitialMmapSize: initialMmap})
		return err
	})
	if err != nil {
		if errors.Is(err, bberrors.ErrTimeout) {
			return nil, fmt.Errorf("store %s: in use by another process", path)
		}
		return nil, fmt.Errorf("store %s: %w (not a store, or a damaged one: restore a backup)", path, err)
	}
	// Read the whole file once, on this goroutine, under guard: a damaged
	// page (bbolt asserts on it, or it points outside the file) is
	// refused here, with what is wrong, rather than crash the process or
	// serve altered data later. (bbolt's Tx.Check walks the file on a
	// goroutine of its own, where a fault could not be caught.)
	if err := guard(func() error { return walk(db, path) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: damaged: %w (restore a backup)", path, err)
	}
	s := &Store{db: db, history: opts.History}
	err = guard(func() error { return db.Update(s.initTx) })
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// checkMetaPages validates both of bbolt's meta pages (the file's first
// two pages: magic, version, checksum). bbolt opens a file whose newer
// meta page is damaged at the older one — its previous transaction —
// silently losing the last committed batch; xdsd refuses such a file
// instead, so that no acknowledged write is lost without a word.
// (bbolt writes the meta page last, after syncing the data, so a process
// killed mid-commit leaves both valid.)
func checkMetaPages(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil // a new store
	}
	if err != nil {
		return err
	}
	defer f.Close()
	const headerSize, metaSize, magic, version = 16, 56, 0xED0CDAED, 2 // metaSize: the fields before the checksum
	read := func(off int64) ([]byte, error) {
		b := make([]byte, headerSize+metaSize+8)
		if _, err := f.ReadAt(b, off); err != nil {
			return nil, err
		}
		return b[headerSize:], nil
	}
	valid := func(m []byte) bool {
		h := fnv.New64a()
		h.Write(m[:metaSize])
		return binary.LittleEndian.Uint32(m[0:]) == magic && binary.LittleEndian.Uint32(m[4:]) == version &&
			binary.LittleEndian.Uint64(m[metaSize:]) == h.Sum64()
	}
	m0, err := read(0)
	if err != nil {
		return nil // too short to be a store: bbolt says so
	}
	pageSize := int64(os.Getpagesize())
	if valid(m0) {
		pageSize = int64(binary.LittleEndian.Uint32(m0[8:]))
	}
	m1, err := read(pageSize)
	if err != nil {
		return nil
	}
	switch v0, v1 := valid(m0), valid(m1); {
	case v0 == v1:
		return nil // both good, or no bolt file at all (bbolt says so)
	case !v0:
		return errors.New("meta page 0 is damaged: opening at the other would go back to an earlier transaction and lose committed batches; restore a backup")
	default:
		return errors.New("meta page 1 is damaged: opening at the other would go back to an earlier transaction and lose committed batches; restore a backup")
	}
}

// walk checks the file is as long as its meta page says, and reads every
// key and value of every bucket.
func walk(db *bbolt.DB, path string) error {
	return db.View(func(tx *bbolt.Tx) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if tx.Size() > fi.Size() {
			return fmt.Errorf("truncated: %d bytes, %d expected", fi.Size(), tx.Size())
		}
		var visit func(b *bbolt.Bucket, depth int) error
		visit = func(b *bbolt.Bucket, depth int) error {
			if depth > 8 {
				return errors.New("buckets nested too deep")
			}
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					if nb := b.Bucket(k); nb != nil {
						return visit(nb, depth+1)
					}
				}
				return nil
			})
		}
		if err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error { return visit(b, 0) }); err != nil {
			return err
		}
		// Every stored variant decodes and passes its checksum.
		if res := tx.Bucket(bucketRes); res != nil {
			return res.ForEach(func(k, v []byte) error {
				key, err := splitKey(k)
				if err != nil {
					return err
				}
				_, err = decodeRecord(key, v)
				return err
			})
		}
		return nil
	})
}

// guard runs fn, turning a panic — bbolt asserts on damaged pages, and a
// fault reading a mapped page past a truncated file's end is made a panic
// here — into an error, so a damaged store never crashes the process.
func guard(fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("damaged store: %v", r)
		}
	}()
	return fn()
}

// initTx makes the store's buckets and reads its revision.
func (s *Store) initTx(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketRes); err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketLog); err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketUser); err != nil {
		return err
	}
	if f := meta.Get(keyFormat); f == nil {
		return meta.Put(keyFormat, u64(format))
	} else if binary.BigEndian.Uint64(f) != format {
		return fmt.Errorf("unsupported store format %d (this xdsd reads %d)", binary.BigEndian.Uint64(f), format)
	}
	s.rev = int64(getU64(meta.Get(keyRev)))
	return nil
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

// The record format is shared with the etcd backend (store.EncodeRecord).
var (
	resKey       = store.ResKey
	splitKey     = store.SplitKey
	encodeRecord = store.EncodeRecord
	decodeRecord = store.DecodeRecord
)

type txReader struct{ b *bbolt.Bucket }

func (r txReader) Variants(typeURL, name string) ([]*resource.Variant, error) {
	prefix := resKey(resource.Key{Type: typeURL, Name: name})
	var out []*resource.Variant
	c := r.b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		key, err := splitKey(k)
		if err != nil {
			return nil, err
		}
		vr, err := decodeRecord(key, v)
		if err != nil {
			return nil, err
		}
		out = append(out, vr)
	}
	return out, nil
}

func encodeKeys(keys []resource.Key) []byte {
	var b []byte
	for _, k := range keys {
		b = protowire.AppendBytes(b, resKey(k))
	}
	return b
}

func decodeKeys(b []byte) ([]resource.Key, error) {
	var out []resource.Key
	for len(b) > 0 {
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errors.New("corrupt log entry")
		}
		b = b[n:]
		k, err := splitKey(v)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// errNoChange rolls back the transaction of a batch that changes nothing,
// so that it costs no write to the file.
var errNoChange = errors.New("no change")

// Apply implements store.Store.
func (s *Store) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Result{}, store.ErrClosed
	}
	rev := s.rev + 1
	var p store.Plan
	err := s.db.Update(func(tx *bbolt.Tx) error {
		res := tx.Bucket(bucketRes)
		var err error
		if p, err = store.MakePlan(txReader{res}, b, rev); err != nil {
			return err
		}
		metaChanged, err := putUserMeta(tx.Bucket(bucketUser), p.Meta)
		if err != nil {
			return err
		}
		if p.Empty() {
			if !metaChanged {
				return errNoChange
			}
			return nil
		}
		var keys []resource.Key
		for _, k := range p.Deletes {
			if err := res.Delete(resKey(k)); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		// In key order, into pages filled up: a large batch then appends
		// to the tree instead of splitting pages at random, and the pages
		// it dirties (which bbolt holds until the commit) are half as many.
		puts := make([]record, len(p.Puts))
		for i, v := range p.Puts {
			puts[i] = record{key: resKey(v.Key()), v: v}
		}
		slices.SortFunc(puts, func(a, b record) int { return bytes.Compare(a.key, b.key) })
		if len(puts) > bulkPuts {
			res.FillPercent = 1
		}
		for _, r := range puts {
			rec, err := encodeRecord(r.v)
			if err != nil {
				return err
			}
			if err := res.Put(r.key, rec); err != nil {
				return err
			}
			keys = append(keys, r.v.Key())
		}
		lg := tx.Bucket(bucketLog)
		if err := lg.Put(u64(uint64(rev)), encodeKeys(keys)); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if drop := rev - int64(s.history); drop > 0 {
			// Trim history older than the window, a little at a time so no
			// apply pays for a long backlog.
			c := lg.Cursor()
			for k, _ := c.First(); k != nil && int64(getU64(k)) <= drop; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
			}
			if err := meta.Put(keyCompact, u64(uint64(drop))); err != nil {
				return err
			}
		}
		return meta.Put(keyRev, u64(uint64(rev)))
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return store.Result{}, err
	}
	if p.Empty() {
		return store.Result{Rev: s.rev}, nil
	}
	s.rev = rev
	s.last = store.ChangeSet{Rev: rev, Puts: p.Puts, Deletes: p.Deletes}
	s.notify.Wake()
	return p.Result(rev), nil
}

// initialMmap is the size of the file's first memory map.
const initialMmap = 1 << 30

// bulkPuts is the batch size past which pages are filled up.
const bulkPuts = 1000

type record struct {
	key []byte
	v   *resource.Variant
}

// putUserMeta writes a plan's metadata and reports whether any of it
// differed from what was stored.
func putUserMeta(b *bbolt.Bucket, m map[string][]byte) (bool, error) {
	changed := false
	for k, v := range m {
		old := b.Get([]byte(k))
		if v == nil && old == nil || v != nil && old != nil && bytes.Equal(v, old) {
			continue
		}
		changed = true
		var err error
		if v == nil {
			err = b.Delete([]byte(k))
		} else {
			err = b.Put([]byte(k), v)
		}
		if err != nil {
			return false, fmt.Errorf("metadata key %.64q: %w", k, err)
		}
	}
	return changed, nil
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, since int64) (store.ChangeSet, error) {
	s.mu.Lock()
	closed, last := s.closed, s.last
	s.mu.Unlock()
	if closed {
		return store.ChangeSet{}, store.ErrClosed
	}
	if last.Rev > 0 && since == last.Rev-1 {
		// A watcher one revision behind is given the last batch's
		// variants themselves: a large batch is then neither read back
		// from the file nor held twice.
		return last, nil
	}
	var cs store.ChangeSet
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta, res, lg := tx.Bucket(bucketMeta), tx.Bucket(bucketRes), tx.Bucket(bucketLog)
			rev := int64(getU64(meta.Get(keyRev)))
			compacted := int64(getU64(meta.Get(keyCompact)))
			if since < 0 || since < compacted || since > rev {
				cs = store.ChangeSet{Rev: rev, Reset: true}
				return res.ForEach(func(k, v []byte) error {
					key, err := splitKey(k)
					if err != nil {
						return err
					}
					vr, err := decodeRecord(key, v)
					if err != nil {
						return err
					}
					cs.Puts = append(cs.Puts, vr)
					return nil
				})
			}
			var keys []resource.Key
			c := lg.Cursor()
			for k, v := c.Seek(u64(uint64(since + 1))); k != nil; k, v = c.Next() {
				ks, err := decodeKeys(v)
				if err != nil {
					return err
				}
				keys = append(keys, ks...)
			}
			var err error
			cs, err = store.Coalesce(rev, keys, func(k resource.Key) (*resource.Variant, error) {
				v := res.Get(resKey(k))
				if v == nil {
					return nil, nil
				}
				return decodeRecord(k, v)
			})
			return err
		})
	})
	return cs, err
}

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
