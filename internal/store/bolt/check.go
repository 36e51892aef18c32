package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"

	bbolt "go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// The checks Open makes of a file before it serves from it: both meta
// pages valid, the file as long as it says, every record and body readable
// and passing its checksum; and guard, which turns bbolt's panics on a
// damaged page into errors.

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
// key and value of every bucket. With loaded, it keeps there the current
// variants it decoded, at the file's revision. With full, it decodes
// every revision record too; without (Open), it checks their checksums,
// which is what finds damage, and leaves decoding them to reading them
// (history) and to Check: a tenth of a restart on a million variants
// went to decoding the ten revision records that wrote them. The current
// variants are
// read on this goroutine and one more (decodeRecords), and the history,
// the bodies and the revision records in a read transaction of their own
// on a third: a restart on a million variants uses both cores of a small
// machine.
func walk(db *bbolt.DB, path string, loaded *store.ChangeSet, full bool) error {
	rest := make(chan error, 1)
	var bc bodyCounts
	go func() {
		rest <- guard(func() error {
			return db.View(func(tx *bbolt.Tx) error { return checkHistory(tx, full, &bc) })
		})
	}()
	matched := 0 // current records whose body was found
	err := db.View(func(tx *bbolt.Tx) error {
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
		if m := tx.Bucket(bucketMeta); loaded != nil && m != nil {
			loaded.Rev = int64(getU64(m.Get(keyRev)))
		}
		// Every stored variant decodes and passes its checksum.
		if res := tx.Bucket(bucketRes); res != nil {
			bkey, _ := bodyKeys(tx)
			var err error
			matched, err = decodeRecords(res, tx.Bucket(bucketBody), bkey, loaded)
			return err
		}
		return nil
	})
	if rerr := <-rest; err == nil {
		err = rerr
	}
	if err == nil && bc.loose+bc.excusedCurrent != matched {
		// Some body belongs to no record: find which, to say so.
		err = guard(func() error { return db.View(findLooseBody) })
		if err == nil {
			err = fmt.Errorf("%d bodies without their records", bc.loose+bc.excusedCurrent-matched)
		}
	}
	return err
}

// bodyCounts is what checkHistory counts of the bodies, for walk to
// check that each belongs to a record without a search for each: loose
// are those that must be a current record's (neither kept for history
// nor prewritten), excusedCurrent those that need not be but are. Every
// loose body is a current record's when the two add up to the current
// records that have a body (each of which decodeRecords found).
type bodyCounts struct{ loose, excusedCurrent int }

// bodyKeys returns how the file keys a body, from its record's key and
// reference, and back. A file of format 2, not yet upgraded, keeps a body
// under its record's key then its reference.
func bodyKeys(tx *bbolt.Tx) (bkey func(k, ref []byte) []byte, split func(bk []byte) (k, ref []byte)) {
	if m := tx.Bucket(bucketMeta); m != nil && getU64(m.Get(keyFormat)) == 2 {
		return func(k, ref []byte) []byte { return append(append([]byte(nil), k...), ref...) },
			func(bk []byte) (k, ref []byte) { return bk[:len(bk)-8], bk[len(bk)-8:] }
	}
	return bodyKey, func(bk []byte) (k, ref []byte) { return bk[8:], bk[:8] }
}

// checkHistory checks what walk leaves to another goroutine: every
// variant kept for history decodes and passes its checksum, every body
// belongs to a record (a current one, one kept for history, or one being
// prewritten: counted in bc, for walk to compare with the current
// records), and every revision record passes its checksum and, with
// full, decodes.
func checkHistory(tx *bbolt.Tx, full bool, bc *bodyCounts) error {
	bodies := tx.Bucket(bucketBody)
	bkey, split := bodyKeys(tx)
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
			if _, err = getVariantAt(bodies, bkey, key, k[8:], v); err != nil {
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
	if res := tx.Bucket(bucketRes); res != nil && bodies != nil {
		// Bodies prewritten for a revision not committed (an apply in
		// progress when a backup was taken, or stopped by a crash) are
		// left for Open to remove.
		prewritten := tx.Bucket(bucketMeta).Get(keyPrewritten)
		steps := tx.Bucket(bucketPrewrite) // (nil in a file made before it)
		err := bodies.ForEach(func(k, _ []byte) error {
			if len(k) < 8 {
				return fmt.Errorf("corrupt body key %q", k)
			}
			rk, ref := split(k)
			if !bytes.Equal(ref, prewritten) && !kept[string(k)] && (steps == nil || steps.Get(ref) == nil) {
				bc.loose++
			} else if bytes.Equal(store.BodyRef(res.Get(rk)), ref) {
				bc.excusedCurrent++
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if revs := tx.Bucket(bucketRevs); revs != nil {
		return revs.ForEach(func(k, v []byte) error {
			if !full {
				return checkRevision(k, v)
			}
			_, err := openRevision(k, v)
			return err
		})
	}
	return nil
}

// findLooseBody finds a body that belongs to no record: one neither a
// current record's, nor kept for history, nor prewritten.
func findLooseBody(tx *bbolt.Tx) error {
	res, bodies := tx.Bucket(bucketRes), tx.Bucket(bucketBody)
	if res == nil || bodies == nil {
		return nil
	}
	bkey, split := bodyKeys(tx)
	kept := map[string]bool{}
	if undo := tx.Bucket(bucketUndo); undo != nil {
		undo.ForEach(func(k, v []byte) error {
			if ref := store.BodyRef(v); ref != nil && len(k) >= 8 {
				kept[string(bkey(k[8:], ref))] = true
			}
			return nil
		})
	}
	prewritten := tx.Bucket(bucketMeta).Get(keyPrewritten)
	steps := tx.Bucket(bucketPrewrite)
	return bodies.ForEach(func(k, _ []byte) error {
		rk, ref := split(k)
		if !bytes.Equal(store.BodyRef(res.Get(rk)), ref) && !bytes.Equal(ref, prewritten) && !kept[string(k)] &&
			(steps == nil || steps.Get(ref) == nil) {
			return fmt.Errorf("a body without its record, under %q", k)
		}
		return nil
	})
}

// decodeRecords decodes every current variant, checking its checksum,
// and with loaded keeps them there in the order of their keys; it
// returns how many had a body apart. It reads the records and finds
// their bodies (bbolt's work) on this goroutine, and decodes them on
// another: a restart on a million variants, on two cores, spent half
// its time here. The bytes it hands over are bbolt's, valid while the
// read transaction lasts, which is until this returns.
func decodeRecords(res, bodies *bbolt.Bucket, bkey func(k, ref []byte) []byte, loaded *store.ChangeSet) (int, error) {
	type record struct {
		key       resource.Key
		rec, body []byte
	}
	const chunk = 256
	work := make(chan []record, 16)
	done := make(chan error, 1)
	go func() {
		err := guard(func() error {
			for rs := range work {
				for _, r := range rs {
					vr, err := store.DecodeHead(r.key, r.rec, func([]byte) []byte { return r.body })
					if err != nil {
						return err
					}
					if loaded != nil {
						loaded.Puts = append(loaded.Puts, vr)
					}
				}
			}
			return nil
		})
		for range work {
			// (what is left, once one failed)
		}
		done <- err
	}()
	find := bodyFinder{bodies: bodies, bkey: bkey, at: map[string]*bbolt.Cursor{}}
	matched := 0
	rs := make([]record, 0, chunk)
	err := res.ForEach(func(k, v []byte) error {
		key, err := splitKey(k)
		if err != nil {
			return err
		}
		r := record{key: key, rec: v}
		if ref := store.BodyRef(v); ref != nil && bodies != nil {
			if r.body = find.body(k, ref); r.body != nil {
				matched++
			}
		}
		if rs = append(rs, r); len(rs) == chunk {
			work <- rs
			rs = make([]record, 0, chunk)
		}
		return nil
	})
	if err == nil && len(rs) > 0 {
		work <- rs
	}
	close(work)
	if derr := <-done; err == nil {
		err = derr
	}
	return matched, err
}

// bodyFinder finds the bodies of the current records, read in the order
// of their keys. The bodies of one revision are kept in that order too
// (under the revision, then the record's key), so a cursor for each
// revision finds the next body one step on, mostly, rather than by a
// search of the bodies' tree from its root: a million searches were a
// fifth of a restart.
type bodyFinder struct {
	bodies *bbolt.Bucket
	bkey   func(k, ref []byte) []byte
	at     map[string]*bbolt.Cursor // by reference (revision): where its last body was
}

// maxBodyCursors bounds the cursors of a bodyFinder: past it, bodies of
// further revisions are searched for.
const maxBodyCursors = 4096

// body returns the body of the record of key k that references ref; nil
// when there is none.
func (f *bodyFinder) body(k, ref []byte) []byte {
	want := f.bkey(k, ref)
	c := f.at[string(ref)]
	if c == nil {
		if len(f.at) >= maxBodyCursors {
			return f.bodies.Get(want)
		}
		c = f.bodies.Cursor()
		f.at[string(ref)] = c
	} else {
		// A few steps on from the revision's last body.
		for range 4 {
			ck, v := c.Next()
			switch cmp := bytes.Compare(ck, want); {
			case ck == nil || cmp > 0:
			case cmp == 0:
				return v
			default:
				continue
			}
			break
		}
	}
	if ck, v := c.Seek(want); bytes.Equal(ck, want) {
		return v
	}
	return nil
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
