package bolt

import (
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// The layout version of the file and the upgrades Open makes: format 1
// (bodies in their records) and 2 (bodies apart, keyed by record then
// revision) to 3 (bodies keyed by revision first).

// format is the layout of the file: 2 keeps bodies apart (bucketBody); 3
// keys them by revision first (bodyKey), keeps those history refers to
// (putUndo), and writes log entries and revision records with a table of
// the types they name (encodeKeys). A file of format 1 or 2 is upgraded
// on open (format 2's bodies are moved under their new keys; everything
// else stays readable as it is); an xdsd that reads only older formats
// refuses a newer file, which it would misread.
const format = 3

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
	if _, err := tx.CreateBucketIfNotExists(bucketPrewrite); err != nil {
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
	// Steps of batches prewritten while they were read, which a crash
	// stopped before their commit (prewrite.go).
	if err := dropAbandonedSteps(tx); err != nil {
		return err
	}
	if st := meta.Get(keyPrewritten); st != nil {
		// An Apply was stopped (a crash) after prewrite bodies for a
		// revision it did not commit.
		if prewritten := int64(getU64(st)); prewritten > s.rev {
			return dropPrewritten(tx, prewritten)
		}
		return fmt.Errorf("damaged: bodies prewritten for revision %d, at or before the committed %d", getU64(st), s.rev)
	}
	return nil
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
