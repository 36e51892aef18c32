package bolt

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/resource"
)

// The key-list codec of log entries and revision records: a table of the
// type URLs they name, then each key by its type's index.

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
