package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// resKey is type 0x00 name 0x00 constraints; names never hold NUL
// (store.MakePlan rejects them).
func ResKey(k resource.Key) []byte {
	b := make([]byte, 0, len(k.Type)+len(k.Name)+len(k.Constraints)+2)
	b = append(b, k.Type...)
	b = append(b, 0)
	b = append(b, k.Name...)
	b = append(b, 0)
	return append(b, k.Constraints...)
}

// SplitKey splits a key ResKey made.
func SplitKey(b []byte) (resource.Key, error) {
	parts := bytes.SplitN(b, []byte{0}, 3)
	if len(parts) != 3 {
		return resource.Key{}, fmt.Errorf("corrupt resource key %q", b)
	}
	return resource.Key{Type: string(parts[0]), Name: string(parts[1]), Constraints: string(parts[2])}, nil
}

// Record fields.
const (
	fVersion     = 1
	fPayloadURL  = 2
	fConstraints = 3
	fBody        = 4
	fDoNotCache  = 5
	fTTL         = 6 // nanoseconds, as a varint inside the bytes field
	// fBodyApart replaces fBody in a record whose body the backend keeps
	// apart (EncodeHead): its value is the backend's reference to the
	// body, and the checksum covers the body too.
	fBodyApart = 7
	// fChecksum, last, is the CRC-32C of the record's key and of every
	// field before it: a record damaged on disk (a flipped bit in its key,
	// type, constraints or payload) is refused, never served altered.
	// Records written before it was kept have none.
	fChecksum = 15
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordSum(k resource.Key, fields, apart []byte) []byte {
	h := crc32.New(castagnoli)
	h.Write(ResKey(k))
	h.Write(fields)
	h.Write(apart)
	return binary.BigEndian.AppendUint32(nil, h.Sum32())
}

// EncodeRecord encodes a variant as backends store it: its version,
// payload URL, constraints, flags and body, then a checksum of all of it
// and of its key.
func EncodeRecord(v *resource.Variant) ([]byte, error) { return encodeRecord(v, nil) }

// EncodeHead encodes v's record without its body, for a backend that
// stores v.Body() apart, as it is, where ref says: bolt hands a batch's
// payloads to the file without copying them into records, and can write
// them before the revision that makes them visible. The record holds ref,
// and its checksum covers the body. DecodeHead reads it back.
func EncodeHead(v *resource.Variant, ref []byte) ([]byte, error) { return encodeRecord(v, ref) }

// BodyRef is the reference to the body kept apart that a record holds,
// nil for a record holding its body.
func BodyRef(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil
		}
		b = b[n:]
		val, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == fBodyApart {
			return val
		}
	}
	return nil
}

func encodeRecord(v *resource.Variant, ref []byte) ([]byte, error) {
	apart := ref != nil
	var cons []byte
	if !v.Constraints.IsZero() {
		var err error
		if cons, err = (proto.MarshalOptions{Deterministic: true}).Marshal(v.Constraints.Proto()); err != nil {
			return nil, err
		}
	}
	// The payload URL is left out when it is the type's (DecodeRecord
	// reads a missing one as the type's): a large batch holds one record
	// per resource until its commit.
	url := v.PayloadURL
	if url == v.Type.URL {
		url = ""
	}
	// Exactly the record's size (every tag is one byte): until the commit
	// a batch of 100,000 resources holds as many records, and a bound
	// instead made each about 80 bytes larger.
	n := 1 + protowire.SizeBytes(len(v.Version)) + 1 + protowire.SizeBytes(4)
	if url != "" {
		n += 1 + protowire.SizeBytes(len(url))
	}
	if cons != nil {
		n += 1 + protowire.SizeBytes(len(cons))
	}
	if v.DoNotCache {
		n += 1 + protowire.SizeBytes(1)
	}
	if v.TTL > 0 {
		n += 1 + protowire.SizeBytes(protowire.SizeVarint(uint64(v.TTL)))
	}
	if apart {
		n += 1 + protowire.SizeBytes(len(ref))
	} else {
		n += 1 + protowire.SizeBytes(v.Size())
	}
	b := make([]byte, 0, n)
	b = protowire.AppendTag(b, fVersion, protowire.BytesType)
	b = protowire.AppendString(b, v.Version)
	if url != "" {
		b = protowire.AppendTag(b, fPayloadURL, protowire.BytesType)
		b = protowire.AppendString(b, url)
	}
	if cons != nil {
		b = protowire.AppendTag(b, fConstraints, protowire.BytesType)
		b = protowire.AppendBytes(b, cons)
	}
	if v.DoNotCache {
		b = protowire.AppendTag(b, fDoNotCache, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte{1})
	}
	if v.TTL > 0 {
		b = protowire.AppendTag(b, fTTL, protowire.BytesType)
		b = protowire.AppendBytes(b, protowire.AppendVarint(nil, uint64(v.TTL)))
	}
	var sum []byte
	if apart {
		b = protowire.AppendTag(b, fBodyApart, protowire.BytesType)
		b = protowire.AppendBytes(b, ref)
		sum = recordSum(v.Key(), b, v.Body())
	} else {
		b = protowire.AppendTag(b, fBody, protowire.BytesType)
		b = protowire.AppendBytes(b, v.Body())
		sum = recordSum(v.Key(), b, nil)
	}
	b = protowire.AppendTag(b, fChecksum, protowire.BytesType)
	return protowire.AppendBytes(b, sum), nil
}

// DecodeRecord decodes a record EncodeRecord made for key k, refusing one
// whose checksum does not match.
func DecodeRecord(k resource.Key, b []byte) (*resource.Variant, error) {
	return DecodeHead(k, b, nil)
}

// DecodeHead decodes a record that EncodeRecord or EncodeHead made for key
// k. For one of EncodeHead's, body returns the body stored apart under the
// record's reference (nil when there is none: the record is refused as
// damaged). The variant holds a copy of the bytes it is given.
func DecodeHead(k resource.Key, b []byte, body func(ref []byte) []byte) (*resource.Variant, error) {
	v, _, err := decodeHead(k, b, body, true)
	return v, err
}

// PeekHead decodes a record as DecodeHead does, but returns the variant
// without its payload, and the payload apart, as body (or b) holds it:
// bytes that are the caller's to keep or not. Its checksum is not
// checked. A planner compares a batch with what is stored this way
// without copying what is stored.
func PeekHead(k resource.Key, b []byte, body func(ref []byte) []byte) (*resource.Variant, []byte, error) {
	return decodeHead(k, b, body, false)
}

func decodeHead(k resource.Key, b []byte, body func(ref []byte) []byte, whole bool) (*resource.Variant, []byte, error) {
	var (
		version, payloadURL string
		cons                constraint.Constraints
		payload, apart      []byte
		dnc                 bool
		ttl                 time.Duration
	)
	all := b
	for len(b) > 0 {
		fieldStart := len(all) - len(b)
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, nil, fmt.Errorf("corrupt record for %s", k)
		}
		b = b[n:]
		val, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, nil, fmt.Errorf("corrupt record for %s", k)
		}
		b = b[n:]
		switch num {
		case fVersion:
			version = string(val)
		case fPayloadURL:
			payloadURL = string(val)
		case fConstraints:
			var p discoveryv3.DynamicParameterConstraints
			if err := proto.Unmarshal(val, &p); err != nil {
				return nil, nil, fmt.Errorf("record for %s: %w", k, err)
			}
			c, err := constraint.FromProto(&p)
			if err != nil {
				return nil, nil, fmt.Errorf("record for %s: %w", k, err)
			}
			cons = c
		case fBody:
			payload = val
		case fBodyApart:
			if body == nil {
				return nil, nil, fmt.Errorf("corrupt record for %s: its body is kept apart, and there is nowhere to read it from", k)
			}
			if payload = body(val); payload == nil {
				return nil, nil, fmt.Errorf("damaged record for %s: its body is missing", k)
			}
			apart = payload
		case fChecksum:
			if whole && (len(b) != 0 || !bytes.Equal(val, recordSum(k, all[:fieldStart], apart))) {
				return nil, nil, fmt.Errorf("damaged record for %s: checksum mismatch", k)
			}
		case fDoNotCache:
			dnc = len(val) == 1 && val[0] == 1
		case fTTL:
			d, n := protowire.ConsumeVarint(val)
			if n != len(val) || d > math.MaxInt64 {
				return nil, nil, fmt.Errorf("corrupt TTL in the record for %s", k)
			}
			ttl = time.Duration(d)
		}
	}
	t := resource.ForURL(k.Type)
	if !whole {
		if payloadURL == "" {
			payloadURL = t.URL
		}
		return &resource.Variant{Type: t, Name: k.Name, Constraints: cons, Version: version, PayloadURL: payloadURL, DoNotCache: dnc, TTL: ttl}, payload, nil
	}
	v := resource.NewVariant(t, k.Name, cons, version, payloadURL, payload)
	v.DoNotCache = dnc
	v.TTL = ttl
	return v, nil, nil
}
