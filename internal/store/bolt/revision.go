package bolt

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// The revision record codec: who applied what, when, and the keys it
// changed, sealed with a CRC-32C.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealRevision appends to a revision record the CRC-32C of its revision
// and bytes, as every variant record has one: a damaged record is
// refused, never shown as history or restored from.
func sealRevision(rev int64, rec []byte) []byte {
	return binary.BigEndian.AppendUint32(rec, crc32.Update(crc32.Checksum(u64(uint64(rev)), castagnoli), castagnoli, rec))
}

// openRevision checks and decodes a sealed revision record.
func openRevision(k, v []byte) (store.Revision, error) {
	if err := checkRevision(k, v); err != nil {
		return store.Revision{}, err
	}
	rev := getU64(k)
	r, err := decodeRevision(int64(rev), v[:len(v)-4])
	if err != nil {
		return store.Revision{}, fmt.Errorf("revision %d: %w", rev, err)
	}
	return r, nil
}

// checkRevision checks a revision record's checksum.
func checkRevision(k, v []byte) error {
	rev := getU64(k)
	if len(v) < 4 {
		return fmt.Errorf("damaged record of revision %d: %d bytes", rev, len(v))
	}
	rec, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, rec) != sum {
		return fmt.Errorf("damaged record of revision %d: checksum mismatch", rev)
	}
	return nil
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
