package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
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
	// keyStaged names the revision whose bodies a large Apply is writing
	// ahead of its commit (see Apply).
	keyStaged = []byte("staged")
)

// format is the layout of the file: 2 keeps bodies apart (bucketBody); 3
// keys them by revision first (bodyKey), keeps those history refers to
// (putUndo), and writes log entries and revision records with a table of
// the types they name (encodeKeys). A file of format 1 or 2 is upgraded
// on open (format 2's bodies are moved under their new keys; everything
// else stays readable as it is); an xdsd that reads only older formats
// refuses a newer file, which it would misread.
const format = 3

// Options tune a Store.
type Options struct {
	// History is how many revisions of change history to keep
	// (DefaultHistory when zero).
	History int
	// LockTimeout bounds the wait for another process holding the file
	// (one second when zero).
	LockTimeout time.Duration
	// StageBytes is the size of payloads past which a batch is written
	// in steps (see Apply), and the size of each step: DefaultStageBytes
	// when zero; negative for one transaction whatever the size.
	StageBytes int
	// PageSize is the page size of a new file (DefaultPageSize when
	// zero; at most 64 KiB); a file keeps the page size it was made with.
	PageSize int
}

// DefaultPageSize is Options.PageSize when it is zero. bbolt writes a
// transaction page by page (a call each), and a page holds two payloads
// of 1.5 KB at 4 KiB: 100,000 clusters took 37,000 writes. At 16 KiB an
// apply of them costs the server 5-8 % less CPU and its commit a fifth
// less time; a commit of one resource, which writes a page of each
// bucket it touches, 0.67 ms instead of 0.56 (64 KiB: 0.96 ms, for a
// little more on large batches). BENCHMARKS.md, "Large batches".
const DefaultPageSize = 16 << 10

// DefaultStageBytes is Options.StageBytes when it is zero.
const DefaultStageBytes = 16 << 20

// Store is a store.Store kept in a bbolt file.
type Store struct {
	db         *bbolt.DB
	history    int
	stageBytes int // 0: never

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
	if err := guard(func() error { return walk(db, path) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: damaged: %w (restore a backup)", path, err)
	}
	if opts.StageBytes == 0 {
		opts.StageBytes = DefaultStageBytes
	}
	s := &Store{db: db, history: opts.History, stageBytes: max(opts.StageBytes, 0)}
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
	v0, v1 := valid(m0), false
	if v0 {
		m1, err := read(int64(binary.LittleEndian.Uint32(m0[8:])))
		if err != nil {
			return nil
		}
		v1 = valid(m1)
	} else {
		// Meta page 1 is one page in, and the page size is on the page
		// that is damaged: every size a file may have been made with
		// (the system's, or Options.PageSize) is tried, as bbolt does.
		for ps := int64(1 << 10); ps <= 1<<16 && !v1; ps <<= 1 {
			m1, err := read(ps)
			v1 = err == nil && valid(m1) && int64(binary.LittleEndian.Uint32(m1[8:])) == ps
		}
	}
	switch {
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
		// Every stored variant, current or kept for history, decodes and
		// passes its checksum, and so does every revision record.
		bodies := tx.Bucket(bucketBody)
		// A file of format 2, not yet upgraded, keeps a body under its
		// record's key then its reference.
		bkey, split := bodyKey, func(bk []byte) (k, ref []byte) { return bk[8:], bk[:8] }
		if m := tx.Bucket(bucketMeta); m != nil && getU64(m.Get(keyFormat)) == 2 {
			bkey = func(k, ref []byte) []byte { return append(append([]byte(nil), k...), ref...) }
			split = func(bk []byte) (k, ref []byte) { return bk[:len(bk)-8], bk[len(bk)-8:] }
		}
		getVariant := func(bodies *bbolt.Bucket, key resource.Key, k, rec []byte) (*resource.Variant, error) {
			return getVariantAt(bodies, bkey, key, k, rec)
		}
		kept := map[string]bool{} // bodies undo records refer to
		if undo := tx.Bucket(bucketUndo); undo != nil {
			err := undo.ForEach(func(k, v []byte) error {
				if len(k) < 8 {
					return fmt.Errorf("corrupt history key %q", k)
				}
				key, err := splitKey(k[8:])
				if err != nil {
					return err
				}
				if _, err = getVariant(bodies, key, k[8:], v); err != nil {
					return fmt.Errorf("history of revision %d: %w", getU64(k[:8]), err)
				}
				if ref := store.BodyRef(v); ref != nil {
					kept[string(bkey(k[8:], ref))] = true
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if res := tx.Bucket(bucketRes); res != nil {
			err := res.ForEach(func(k, v []byte) error {
				key, err := splitKey(k)
				if err != nil {
					return err
				}
				_, err = getVariant(bodies, key, k, v)
				return err
			})
			if err != nil {
				return err
			}
			if bodies != nil {
				// Bodies staged for a revision not committed (an apply
				// in progress when a backup was taken, or stopped by a
				// crash) are left for Open to remove.
				staged := tx.Bucket(bucketMeta).Get(keyStaged)
				steps := tx.Bucket(bucketStaging) // (nil in a file made before it)
				err := bodies.ForEach(func(k, _ []byte) error {
					if len(k) < 8 {
						return fmt.Errorf("corrupt body key %q", k)
					}
					rk, ref := split(k)
					if !bytes.Equal(store.BodyRef(res.Get(rk)), ref) && !bytes.Equal(ref, staged) && !kept[string(k)] &&
						(steps == nil || steps.Get(ref) == nil) {
						return fmt.Errorf("a body without its record, under %q", k)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		if revs := tx.Bucket(bucketRevs); revs != nil {
			return revs.ForEach(func(k, v []byte) error {
				_, err := openRevision(k, v)
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

// rekeyBodies moves each body of a file of format 2, which was kept under
// its record's key then the revision, under bodyKey.
func rekeyBodies(tx *bbolt.Tx) error {
	old := tx.Bucket(bucketBody)
	tmp, err := tx.CreateBucket([]byte("bodies3"))
	if err != nil {
		return err
	}
	err = old.ForEach(func(k, v []byte) error {
		if len(k) < 8 {
			return fmt.Errorf("corrupt body key %q", k)
		}
		return tmp.Put(bodyKey(k[:len(k)-8], k[len(k)-8:]), v)
	})
	if err != nil {
		return err
	}
	if err := tx.DeleteBucket(bucketBody); err != nil {
		return err
	}
	nb, err := tx.CreateBucket(bucketBody)
	if err != nil {
		return err
	}
	nb.FillPercent = 1
	err = tmp.ForEach(func(k, v []byte) error { return nb.Put(k, v) })
	if err != nil {
		return err
	}
	return tx.DeleteBucket([]byte("bodies3"))
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
	if tx.Bucket(bucketRevs) == nil {
		if _, err := tx.CreateBucket(bucketRevs); err != nil {
			return err
		}
		if rev := meta.Get(keyRev); rev != nil {
			if err := meta.Put(keyHistFrom, rev); err != nil {
				return err
			}
		}
	}
	if _, err := tx.CreateBucketIfNotExists(bucketUndo); err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketBody); err != nil {
		return err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketStaging); err != nil {
		return err
	}
	switch f := getU64(meta.Get(keyFormat)); {
	case f == format:
	case f == 2:
		if err := rekeyBodies(tx); err != nil {
			return fmt.Errorf("upgrading the store from format 2: %w", err)
		}
		if err := meta.Put(keyFormat, u64(format)); err != nil {
			return err
		}
	case f == 1 || meta.Get(keyFormat) == nil:
		if err := meta.Put(keyFormat, u64(format)); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unsupported store format %d (this xdsd reads 1 to %d): a newer xdsd wrote it", f, format)
	}
	s.rev = int64(getU64(meta.Get(keyRev)))
	// Steps of batches staged while they were read, which a crash
	// stopped before their commit (staging.go).
	if err := dropAbandonedSteps(tx); err != nil {
		return err
	}
	if st := meta.Get(keyStaged); st != nil {
		// An Apply was stopped (a crash) after staging bodies for a
		// revision it did not commit.
		if staged := int64(getU64(st)); staged > s.rev {
			return dropStaged(tx, staged)
		}
		return fmt.Errorf("damaged: bodies staged for revision %d, at or before the committed %d", getU64(st), s.rev)
	}
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// The record format is shared with the etcd backend (store.EncodeRecord).
var (
	resKey       = store.ResKey
	splitKey     = store.SplitKey
	encodeRecord = store.EncodeRecord
)

// bodyKey is where the body of the variant under k is, given its record's
// reference: the revision that wrote it, then k. A revision's bodies are
// thus next to each other, after every earlier revision's: writing them
// appends to the bucket, without rewriting the pages of the bodies
// already there, and removing those staged for a revision, or kept by its
// history, removes a range.
func bodyKey(k, ref []byte) []byte {
	return append(append(make([]byte, 0, len(k)+len(ref)), ref...), k...)
}

// putVariant stores v under k: its body, as it is, in bodies under ref
// (unless staged there already), and its record, which refers to it, in
// res.
// bbolt keeps a reference to the bytes until the commit. The body of the
// variant it replaces stays: the revision's undo record refers to it
// (putUndo).
func putVariant(res, bodies *bbolt.Bucket, k []byte, v *resource.Variant, ref []byte, staged bool) error {
	if v.Size() == 0 {
		// bbolt does not tell an empty value from a missing one: an
		// empty body stays in its record.
		rec, err := encodeRecord(v)
		if err != nil {
			return err
		}
		return res.Put(k, rec)
	}
	head, err := store.EncodeHead(v, ref)
	if err != nil {
		return err
	}
	if !staged {
		if err := bodies.Put(bodyKey(k, ref), v.Body()); err != nil {
			return err
		}
	}
	return res.Put(k, head)
}

// putUndo writes the undo records of revision rev, before it changes
// anything: for each variant the plan replaces or removes, its record as
// stored. A record whose body is kept apart refers to it, and the body
// stays until the undo record is trimmed with the history (Apply): history costs no
// copy of a payload, and a batch that changes 100,000 resources holds
// none of their old payloads.
func putUndo(tx *bbolt.Tx, rev int64, p store.Plan) error {
	res, undo := tx.Bucket(bucketRes), tx.Bucket(bucketUndo)
	// Keys of a new revision come after every other: pages filled up, as
	// they will never take a key in between (bbolt's default leaves them
	// half empty, and a commit holds every page it writes).
	undo.FillPercent = 1
	// In key order: bbolt inserts into a node by moving what follows, and
	// 100,000 keys in a map's order took 6 of the 9 seconds the whole
	// apply took.
	// (Sorted as their keys are, without holding the keys: a key's parts
	// hold no NUL; see sortPuts.)
	keys := make([]resource.Key, 0, len(p.Prev))
	for k := range p.Prev {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, store.CompareKeys)
	for _, key := range keys {
		k := append(u64(uint64(rev)), resKey(key)...)
		rec := res.Get(k[8:])
		if rec == nil {
			return fmt.Errorf("the record of %q, which revision %d replaces, is missing", k[8:], rev)
		}
		// A copy: the record's bytes are the file's, and the transaction
		// writes over its key next.
		if err := undo.Put(k, bytes.Clone(rec)); err != nil {
			return err
		}
	}
	return nil
}

// getVariant decodes the variant under key k whose record is rec, with
// its body from bodies when it is kept apart. bodies is nil in a file of
// format 1 opened read-only.
func getVariant(bodies *bbolt.Bucket, key resource.Key, k, rec []byte) (*resource.Variant, error) {
	return getVariantAt(bodies, bodyKey, key, k, rec)
}

// getVariantAt is getVariant with the bodies keyed by bkey.
func getVariantAt(bodies *bbolt.Bucket, bkey func(k, ref []byte) []byte, key resource.Key, k, rec []byte) (*resource.Variant, error) {
	return store.DecodeHead(key, rec, func(ref []byte) []byte {
		if bodies == nil {
			return nil
		}
		return bodies.Get(bkey(k, ref))
	})
}

// txReader is what a plan reads of the store in a transaction: the
// variants without their payloads, which it compares with the batch's
// where the file holds them (SameContent), and keeps without (KeepPrev).
// Planning a batch that changes 100,000 resources copied all their
// payloads before.
type txReader struct{ b, bodies *bbolt.Bucket }

// KeepPrev implements store.PrevKeeper: a plan keeps nothing of what it
// replaces but that it was there, since the undo records are the stored
// records (putUndo).
func (txReader) KeepPrev(*resource.Variant) *resource.Variant { return replaced }

// replaced stands in Plan.Prev for every variant a plan replaces.
var replaced = &resource.Variant{}

func (r txReader) Variants(typeURL, name string) ([]*resource.Variant, error) {
	prefix := resKey(resource.Key{Type: typeURL, Name: name})
	var out []*resource.Variant
	c := r.b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		key, err := splitKey(k)
		if err != nil {
			return nil, err
		}
		vr, _, err := store.PeekHead(key, v, func(ref []byte) []byte { return r.bodies.Get(bodyKey(k, ref)) })
		if err != nil {
			return nil, err
		}
		out = append(out, vr)
	}
	return out, nil
}

// SameContent implements store.ContentComparer, reading old's payload
// where the file holds it.
func (r txReader) SameContent(old, v *resource.Variant) bool {
	if old.PayloadURL != v.PayloadURL || !old.Constraints.Equal(v.Constraints) || old.DoNotCache != v.DoNotCache || old.TTL != v.TTL {
		return false
	}
	k := resKey(old.Key())
	rec := r.b.Get(k)
	if rec == nil {
		return false
	}
	_, body, err := store.PeekHead(old.Key(), rec, func(ref []byte) []byte { return r.bodies.Get(bodyKey(k, ref)) })
	return err == nil && bytes.Equal(body, v.Body())
}

// A log entry lists the keys a revision changed. Since format 3 it starts
// with a 0 byte (an entry of format 1 or 2 starts with the length of its
// first key, never 0), then the key list: the varint count and the
// length-prefixed URLs of the types it names, then for each key its type's
// index, then its name and constraints, length-prefixed. A revision
// record holds the same list with an operation byte before each key.
// Naming each type once halved the log entry and the revision record of a
// batch of 100,000 resources, which the commit holds in memory.
const logFormat3 = 0

func encodeKeys(keys []resource.Key) []byte {
	var kl keyList
	for _, k := range keys {
		kl.size(k)
	}
	b := make([]byte, 0, 1+kl.typesSize()+kl.n)
	b = append(b, logFormat3)
	b = kl.appendTypes(b)
	for _, k := range keys {
		b = kl.appendKey(b, k)
	}
	return b
}

func decodeKeys(b []byte) ([]resource.Key, error) {
	var out []resource.Key
	if len(b) > 0 && b[0] == logFormat3 {
		b, types, err := readTypes(b[1:])
		if err != nil {
			return nil, errors.New("corrupt log entry")
		}
		for len(b) > 0 {
			var k resource.Key
			if b, k, err = readKey(b, types); err != nil {
				return nil, errors.New("corrupt log entry")
			}
			out = append(out, k)
		}
		return out, nil
	}
	for len(b) > 0 { // formats 1 and 2: each key as resKey, length-prefixed
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

// keyList encodes a list of keys with a table of their types.
type keyList struct {
	types map[string]uint64
	order []string
	n     int // bytes of the keys and of the types' URLs, encoded
}

// size counts k in, adding its type to the table.
func (kl *keyList) size(k resource.Key) {
	if kl.types == nil {
		kl.types = map[string]uint64{}
	}
	i, ok := kl.types[k.Type]
	if !ok {
		i = uint64(len(kl.order))
		kl.types[k.Type] = i
		kl.order = append(kl.order, k.Type)
		kl.n += protowire.SizeBytes(len(k.Type))
	}
	kl.n += protowire.SizeVarint(i) + protowire.SizeBytes(len(k.Name)) + protowire.SizeBytes(len(k.Constraints))
}

// typesSize is the size of the type table appendTypes writes.
func (kl *keyList) typesSize() int { return protowire.SizeVarint(uint64(len(kl.order))) }

func (kl *keyList) appendTypes(b []byte) []byte {
	b = protowire.AppendVarint(b, uint64(len(kl.order)))
	for _, t := range kl.order {
		b = protowire.AppendString(b, t)
	}
	return b
}

func (kl *keyList) appendKey(b []byte, k resource.Key) []byte {
	b = protowire.AppendVarint(b, kl.types[k.Type])
	b = protowire.AppendString(b, k.Name)
	return protowire.AppendString(b, k.Constraints)
}

var errKeyList = errors.New("corrupt key list")

func readTypes(b []byte) ([]byte, []string, error) {
	n, m := protowire.ConsumeVarint(b)
	if m < 0 || n > uint64(len(b)) {
		return nil, nil, errKeyList
	}
	b = b[m:]
	types := make([]string, n)
	for i := range types {
		t, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return nil, nil, errKeyList
		}
		types[i], b = string(t), b[m:]
	}
	return b, types, nil
}

func readKey(b []byte, types []string) ([]byte, resource.Key, error) {
	i, m := protowire.ConsumeVarint(b)
	if m < 0 || i >= uint64(len(types)) {
		return nil, resource.Key{}, errKeyList
	}
	b = b[m:]
	name, m := protowire.ConsumeBytes(b)
	if m < 0 {
		return nil, resource.Key{}, errKeyList
	}
	b = b[m:]
	cons, m := protowire.ConsumeBytes(b)
	if m < 0 {
		return nil, resource.Key{}, errKeyList
	}
	return b[m:], resource.Key{Type: types[i], Name: string(name), Constraints: string(cons)}, nil
}

// errNoChange rolls back the transaction of a batch that changes nothing,
// so that it costs no write to the file.
var errNoChange = errors.New("no change")

// Apply implements store.Store.
//
// A batch whose payloads are over Options.StageBytes is written in steps,
// so that bbolt, which holds every page a transaction dirties until its
// commit, never holds a copy of the whole batch: its bodies first, in
// transactions of about StageBytes each, under keys that no record refers
// to yet (invisible: each is its key and the new revision); then one
// transaction writes the records that refer to them, the revision and its
// history, which is what makes the batch visible, all of it or none. A
// batch that fails after its bodies were staged has them removed; a crash
// leaves them under the revision named by keyStaged, and Open removes
// them.
func (s *Store) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	return s.apply(ctx, b, nil)
}

// apply is Apply of b, whose puts pl staged in part while it was read
// (staging.go), or none (pl nil).
func (s *Store) apply(ctx context.Context, b store.Batch, pl *staging) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.Result{}, store.ErrClosed
	}
	if err := store.CheckIfRev(b, s.rev); err != nil {
		return store.Result{}, err
	}
	rev := s.rev + 1
	var (
		p               store.Plan
		planned, staged bool
		ahead           *stagedAhead // what pl staged, while the batch was read
	)
	if pl != nil {
		ahead = &stagedAhead{at: pl.at, refs: pl.refs}
	}
	if pl != nil || s.stageBytes > 0 && batchBytes(b) > s.stageBytes {
		// The bodies of resources new to the store are staged while the
		// plan is made, in a read transaction that bbolt runs beside the
		// writer's (the initial map is large enough that the writer
		// never waits to remap); those of changed ones once it is made.
		// For a batch of new resources the plan then costs no time.
		// The batch is planned in key order, so that the plan's puts are
		// in key order too, as staging and the commit want them.
		// A batch staged while it was read has the bodies of its new
		// resources staged already, but for those new since.
		b.Puts = slices.Clone(b.Puts)
		sortPuts(b.Puts)
		var news []*resource.Variant
		done := make(chan error, 1)
		go func(sorted []*resource.Variant) {
			var err error
			if news, err = s.newPuts(ahead.without(sorted)); err == nil {
				err = s.stage(ctx, rev, news)
			}
			done <- err
		}(b.Puts)
		err := s.db.View(func(tx *bbolt.Tx) error {
			var err error
			p, err = store.MakePlan(txReader{tx.Bucket(bucketRes), tx.Bucket(bucketBody)}, b, rev)
			return err
		})
		if aerr := <-done; err != nil || aerr != nil {
			return store.Result{}, s.unstage(rev, errors.Join(err, aerr))
		}
		planned, staged = true, len(news) > 0
		if !slices.IsSortedFunc(p.Puts, comparePuts) { // (MakePlan keeps a batch's order)
			sortPuts(p.Puts)
		}
		// The plan holds new variants (with their versions) sharing the
		// batch's payloads: without this, the batch's own 100,000
		// variants stayed reachable until the commit.
		b.Puts = nil
		if len(news) == len(p.Puts) {
			// Every put is new, and staged (news holds keys of puts).
		} else if rest := notIn(ahead.without(p.Puts), news); len(rest) > 0 {
			if err := s.stage(ctx, rev, rest); err != nil {
				return store.Result{}, s.unstage(rev, err)
			}
			staged = true
		}
		news = nil
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		res, bodies := tx.Bucket(bucketRes), tx.Bucket(bucketBody)
		if !planned {
			var err error
			if p, err = store.MakePlan(txReader{res, bodies}, b, rev); err != nil {
				return err
			}
		}
		metaChanged, err := putUserMeta(tx.Bucket(bucketUser), p.Meta)
		if err != nil {
			return err
		}
		if p.Empty() {
			if ahead != nil {
				// Staged for resources new then, and put since as the
				// batch has them.
				return ahead.commit(tx)
			}
			if !metaChanged {
				return errNoChange
			}
			return nil
		}
		keys := make([]resource.Key, 0, len(p.Deletes)+len(p.Puts))
		if err := putUndo(tx, rev, p); err != nil {
			return err
		}
		for _, k := range p.Deletes {
			if err := res.Delete(resKey(k)); err != nil { // (its body stays with its undo record)
				return err
			}
			keys = append(keys, k)
		}
		// In key order, into pages filled up: a large batch then appends
		// to the tree instead of splitting pages at random, and the pages
		// it dirties (which bbolt holds until the commit) are half as many.
		if !planned {
			sortPuts(p.Puts)
		}
		puts := p.Puts
		if len(puts) > bulkPuts {
			res.FillPercent, bodies.FillPercent = 1, 1
		}
		ref := u64(uint64(rev))
		for _, v := range puts {
			k := v.Key()
			if at, ok := ahead.take(v); ok {
				if err := putVariant(res, bodies, resKey(k), v, at, true); err != nil {
					return err
				}
			} else if err := putVariant(res, bodies, resKey(k), v, ref, staged); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		if ahead != nil {
			if err := ahead.commit(tx); err != nil {
				return err
			}
		}
		lg := tx.Bucket(bucketLog)
		lg.FillPercent = 1 // (appended to only, as the undo records)
		if err := lg.Put(u64(uint64(rev)), encodeKeys(keys)); err != nil {
			return err
		}
		if err := putHistory(tx, rev, b.Audit, p); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if drop := rev - int64(s.history); drop > 0 {
			// Trim history older than the window, a little at a time so no
			// apply pays for a long backlog.
			for _, bk := range [][]byte{bucketLog, bucketRevs, bucketUndo} {
				c := tx.Bucket(bk).Cursor()
				for k, v := c.First(); len(k) >= 8 && int64(getU64(k[:8])) <= drop; k, v = c.First() {
					if bytes.Equal(bk, bucketUndo) {
						// The body the undo record kept goes with it.
						if ref := store.BodyRef(v); ref != nil {
							if err := bodies.Delete(bodyKey(k[8:], ref)); err != nil {
								return err
							}
						}
					}
					if err := c.Delete(); err != nil {
						return err
					}
				}
			}
			if err := meta.Put(keyCompact, u64(uint64(drop))); err != nil {
				return err
			}
		}
		if staged {
			if err := meta.Delete(keyStaged); err != nil {
				return err
			}
		}
		return meta.Put(keyRev, u64(uint64(rev)))
	})
	if err != nil && !errors.Is(err, errNoChange) {
		if staged {
			err = s.unstage(rev, err)
		}
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

// batchBytes is the size of a batch's payloads.
func batchBytes(b store.Batch) int {
	n := 0
	for _, v := range b.Puts {
		n += v.Size()
	}
	return n
}

// sortPuts orders variants as their keys (resKey) sort, without
// holding the keys: for 100,000 resources those were 9 MB more at the
// batch's peak. A key's parts hold no NUL, so comparing them one after
// the other orders them as the bytes of the keys would.
func sortPuts(vs []*resource.Variant) { slices.SortFunc(vs, comparePuts) }

func comparePuts(a, b *resource.Variant) int { return store.CompareKeys(a.Key(), b.Key()) }

// stageHook, when set (by tests), is called after each transaction of
// staged bodies.
var stageHook func(n int)

// stage writes the bodies of a batch's puts (in key order) for revision
// rev, in transactions of about s.stageBytes, the first of which records
// that revision rev is being staged.
func (s *Store) stage(ctx context.Context, rev int64, puts []*resource.Variant) error {
	ref := u64(uint64(rev))
	for i, n := 0, 0; i < len(puts); n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := s.db.Update(func(tx *bbolt.Tx) error {
			if n == 0 {
				if err := tx.Bucket(bucketMeta).Put(keyStaged, ref); err != nil {
					return err
				}
			}
			bodies := tx.Bucket(bucketBody)
			bodies.FillPercent = 1
			for size := 0; i < len(puts) && size < s.stageBytes; i++ {
				v := puts[i]
				if v.Size() == 0 {
					continue // kept in its record
				}
				if err := bodies.Put(bodyKey(resKey(v.Key()), ref), v.Body()); err != nil {
					return err
				}
				size += v.Size()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if stageHook != nil {
			stageHook(n)
		}
	}
	return nil
}

// newPuts returns those of puts, in key order, whose key the store does
// not hold, reading the records beside them in order.
func (s *Store) newPuts(puts []*resource.Variant) ([]*resource.Variant, error) {
	var news []*resource.Variant
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketRes).Cursor()
		at, _ := c.First()
		for _, v := range puts {
			k := resKey(v.Key())
			if at != nil && bytes.Compare(at, k) < 0 {
				at, _ = c.Seek(k)
			}
			if at == nil || !bytes.Equal(at, k) {
				news = append(news, v)
			}
		}
		return nil
	})
	return news, err
}

// notIn returns the variants of a whose keys are not those of b's; both
// are in key order (sortPuts), and b's keys are some of a's.
func notIn(a, b []*resource.Variant) []*resource.Variant {
	if len(b) == 0 {
		return a
	}
	var out []*resource.Variant
	j := 0
	for _, v := range a {
		for j < len(b) && store.CompareKeys(b[j].Key(), v.Key()) < 0 {
			j++
		}
		if j < len(b) && store.CompareKeys(b[j].Key(), v.Key()) == 0 {
			continue
		}
		out = append(out, v)
	}
	return out
}

// unstage removes what was staged for revision rev, after err (returned,
// joined with any failure of the removal; Open removes what is left).
func (s *Store) unstage(rev int64, err error) error {
	uerr := s.db.Update(func(tx *bbolt.Tx) error { return dropStaged(tx, rev) })
	if uerr != nil {
		uerr = fmt.Errorf("removing the bodies staged for revision %d (the next open removes them): %w", rev, uerr)
	}
	return errors.Join(err, uerr)
}

// dropStaged removes the bodies staged for revision rev, which no record
// refers to, and the mark that they are there.
func dropStaged(tx *bbolt.Tx, rev int64) error {
	ref := u64(uint64(rev))
	bodies := tx.Bucket(bucketBody)
	c := bodies.Cursor()
	for k, _ := c.Seek(ref); k != nil && bytes.HasPrefix(k, ref); k, _ = c.Seek(ref) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Delete(keyStaged)
}

// putHistory writes the record of revision rev (its undo records are
// putUndo's).
func putHistory(tx *bbolt.Tx, rev int64, a store.Audit, p store.Plan) error {
	rec, err := encodeRevision(time.Now(), a, p)
	if err != nil {
		return err
	}
	revs := tx.Bucket(bucketRevs)
	revs.FillPercent = 1 // (appended to only, as the undo records)
	return revs.Put(u64(uint64(rev)), sealRevision(rev, rec))
}

// sealRevision appends to a revision record the CRC-32C of its revision
// and bytes, as every variant record has one: a damaged record is
// refused, never shown as history or restored from.
func sealRevision(rev int64, rec []byte) []byte {
	return binary.BigEndian.AppendUint32(rec, crc32.Update(crc32.Checksum(u64(uint64(rev)), castagnoli), castagnoli, rec))
}

// openRevision checks and decodes a sealed revision record.
func openRevision(k, v []byte) (store.Revision, error) {
	rev := getU64(k)
	if len(v) < 4 {
		return store.Revision{}, fmt.Errorf("damaged record of revision %d: %d bytes", rev, len(v))
	}
	rec, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, rec) != sum {
		return store.Revision{}, fmt.Errorf("damaged record of revision %d: checksum mismatch", rev)
	}
	r, err := decodeRevision(int64(rev), rec)
	if err != nil {
		return store.Revision{}, fmt.Errorf("revision %d: %w", rev, err)
	}
	return r, nil
}

// A revision record is compact, as a batch of 100,000 resources has one:
// a format byte, the length and JSON of its header (time, audit), then
// the changes. In format 2 they are a key list (see encodeKeys) with an
// operation byte before each key; in format 1, each is an operation byte
// and the length and bytes of the key (resKey). The version a put gave is
// store.Version of the revision and the constraints, so it is not stored;
// the changes are sorted on reading.
const (
	revisionFormat1 = 1
	revisionFormat  = 2
)

type revisionHeader struct {
	Time  time.Time   `json:"t"`
	Audit store.Audit `json:"a"`
}

const (
	opCreated = 'c'
	opUpdated = 'u'
	opDeleted = 'd'
)

func encodeRevision(at time.Time, a store.Audit, p store.Plan) ([]byte, error) {
	h, err := json.Marshal(revisionHeader{Time: at.UTC(), Audit: a})
	if err != nil {
		return nil, err
	}
	var kl keyList
	for _, v := range p.Puts {
		kl.size(v.Key())
	}
	for _, k := range p.Deletes {
		kl.size(k)
	}
	// (4 more: sealRevision appends the checksum.)
	b := make([]byte, 0, 1+protowire.SizeBytes(len(h))+kl.typesSize()+kl.n+len(p.Puts)+len(p.Deletes)+4)
	b = append(b, revisionFormat)
	b = protowire.AppendBytes(b, h)
	b = kl.appendTypes(b)
	for _, v := range p.Puts {
		k := v.Key()
		op := byte(opCreated)
		if p.Prev[k] != nil {
			op = opUpdated
		}
		b = kl.appendKey(append(b, op), k)
	}
	for _, k := range p.Deletes {
		b = kl.appendKey(append(b, opDeleted), k)
	}
	return b, nil
}

func decodeRevision(rev int64, b []byte) (store.Revision, error) {
	if len(b) == 0 || b[0] != revisionFormat && b[0] != revisionFormat1 {
		return store.Revision{}, errors.New("damaged revision record: unknown format")
	}
	f := b[0]
	h, n := protowire.ConsumeBytes(b[1:])
	if n < 0 {
		return store.Revision{}, errors.New("damaged revision record: header")
	}
	var hdr revisionHeader
	if err := json.Unmarshal(h, &hdr); err != nil {
		return store.Revision{}, fmt.Errorf("damaged revision record: %w", err)
	}
	r := store.Revision{Rev: rev, Time: hdr.Time, Audit: hdr.Audit}
	b = b[1+n:]
	var types []string
	if f == revisionFormat {
		var err error
		if b, types, err = readTypes(b); err != nil {
			return store.Revision{}, errors.New("damaged revision record: types")
		}
	}
	for len(b) > 0 {
		op := b[0]
		var k resource.Key
		if f == revisionFormat {
			var err error
			if b, k, err = readKey(b[1:], types); err != nil {
				return store.Revision{}, errors.New("damaged revision record: change")
			}
		} else {
			kb, n := protowire.ConsumeBytes(b[1:])
			if n < 0 {
				return store.Revision{}, errors.New("damaged revision record: change")
			}
			b = b[1+n:]
			var err error
			if k, err = splitKey(kb); err != nil {
				return store.Revision{}, err
			}
		}
		c := store.Change{Key: k}
		switch op {
		case opCreated:
			c.Op, c.Version = store.Created, store.Version(rev, k.Constraints)
		case opUpdated:
			c.Op, c.Version = store.Updated, store.Version(rev, k.Constraints)
		case opDeleted:
			c.Op = store.Deleted
		default:
			return store.Revision{}, fmt.Errorf("damaged revision record: operation %q", op)
		}
		r.Changes = append(r.Changes, c)
	}
	slices.SortFunc(r.Changes, func(a, b store.Change) int { return store.CompareKeys(a.Key, b.Key) })
	r.Total = len(r.Changes)
	return r, nil
}

// oldest is the oldest revision whose state the file can give.
func oldest(meta *bbolt.Bucket) int64 {
	return max(int64(getU64(meta.Get(keyCompact))), int64(getU64(meta.Get(keyHistFrom))))
}

// Revisions implements store.Store.
func (s *Store) Revisions(ctx context.Context, q store.HistoryQuery) (store.RevisionList, error) {
	if err := s.open(); err != nil {
		return store.RevisionList{}, err
	}
	var out store.RevisionList
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			out = store.RevisionList{Rev: int64(getU64(meta.Get(keyRev))), Oldest: oldest(meta)}
			c := tx.Bucket(bucketRevs).Cursor()
			var k, v []byte
			switch {
			case q.Before <= 0:
				k, v = c.Last()
			default:
				if k, _ = c.Seek(u64(uint64(q.Before))); k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			}
			for ; k != nil && !q.Full(len(out.Revisions)); k, v = c.Prev() {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := openRevision(k, v)
				if err != nil {
					return err
				}
				if !q.Wants(r.Rev, len(out.Revisions)) {
					continue
				}
				if r, ok := q.Filter.Select(r); ok {
					out.Revisions = append(out.Revisions, r)
				}
			}
			return nil
		})
	})
	return out, err
}

// StateAt implements store.Store.
func (s *Store) StateAt(ctx context.Context, rev int64, f store.Filter) ([]*resource.Variant, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	var out []*resource.Variant
	err := guard(func() error {
		return s.db.View(func(tx *bbolt.Tx) error {
			meta, res, bodies := tx.Bucket(bucketMeta), tx.Bucket(bucketRes), tx.Bucket(bucketBody)
			cur := int64(getU64(meta.Get(keyRev)))
			if err := store.CheckStateAt(rev, cur, oldest(meta)); err != nil {
				return err
			}
			var prefix []byte
			switch {
			case f.Type != "" && f.Name != "":
				prefix = resKey(resource.Key{Type: f.Type, Name: f.Name})
			case f.Type != "":
				prefix = append([]byte(f.Type), 0)
			}
			var now []*resource.Variant
			c := res.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				key, err := splitKey(k)
				if err != nil {
					return err
				}
				if !f.Match(key) {
					continue
				}
				vr, err := getVariant(bodies, key, k, v)
				if err != nil {
					return err
				}
				now = append(now, vr)
			}
			w := store.NewRewinder(now, f)
			undo := tx.Bucket(bucketUndo)
			rc := tx.Bucket(bucketRevs).Cursor()
			for k, v := rc.Last(); k != nil && int64(getU64(k)) > rev; k, v = rc.Prev() {
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := openRevision(k, v)
				if err != nil {
					return err
				}
				err = w.Undo(r, func(key resource.Key) (*resource.Variant, error) {
					k := resKey(key)
					b := undo.Get(append(u64(uint64(r.Rev)), k...))
					if b == nil {
						return nil, nil
					}
					return getVariant(bodies, key, k, b)
				})
				if err != nil {
					return err
				}
			}
			out = w.State()
			return nil
		})
	})
	return out, err
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

// bulkPuts is the batch size past which pages are filled up.
const bulkPuts = 1000

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
			meta, res, lg, bodies := tx.Bucket(bucketMeta), tx.Bucket(bucketRes), tx.Bucket(bucketLog), tx.Bucket(bucketBody)
			rev := int64(getU64(meta.Get(keyRev)))
			compacted := int64(getU64(meta.Get(keyCompact)))
			if since < 0 || since < compacted || since > rev {
				cs = store.ChangeSet{Rev: rev, Reset: true}
				return res.ForEach(func(k, v []byte) error {
					key, err := splitKey(k)
					if err != nil {
						return err
					}
					vr, err := getVariant(bodies, key, k, v)
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
				rk := resKey(k)
				v := res.Get(rk)
				if v == nil {
					return nil, nil
				}
				return getVariant(bodies, k, rk, v)
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
