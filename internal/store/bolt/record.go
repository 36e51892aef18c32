package bolt

import (
	"bytes"

	bbolt "go.etcd.io/bbolt"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Variant records and their bodies: where a body is kept (bodyKey), how a
// variant is written and read, and what a plan reads of the file
// (txReader).

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
// already there, and removing those prewritten for a revision, or kept by its
// history, removes a range.
func bodyKey(k, ref []byte) []byte {
	return append(append(make([]byte, 0, len(k)+len(ref)), ref...), k...)
}

// putVariant stores v under k: its body, as it is, in bodies under ref
// (unless prewritten there already), and its record, which refers to it, in
// res.
// bbolt keeps a reference to the bytes until the commit. The body of the
// variant it replaces stays: the revision's undo record refers to it
// (putUndo).
func putVariant(res, bodies *bbolt.Bucket, k []byte, v *resource.Variant, ref []byte, prewritten bool) error {
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
	if !prewritten {
		if err := bodies.Put(bodyKey(k, ref), v.Body()); err != nil {
			return err
		}
	}
	return res.Put(k, head)
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
