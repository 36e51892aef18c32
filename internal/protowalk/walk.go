package protowalk

import (
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// maxNesting bounds how deep Anys follows messages, Any values included:
// deeper than any client decodes.
const maxNesting = 100

// Anys calls f with the type URL of every google.protobuf.Any in b, the
// encoding of a message of type md, those inside Any values included
// (when their types are registered), and a function that spells the
// Any's field path: fields by name, list elements [i], map entries
// ["key"]. It reads the encoding, decodes no message, and reads only the
// fields whose types can hold an Any.
func Anys(b []byte, md protoreflect.MessageDescriptor, f func(typeURL string, path func() string)) {
	w := anyWalker{f: f}
	w.message(b, md, 0)
}

// AnyFields returns the type URL and value of an Any's encoding; ok is
// false if it does not parse.
func AnyFields(b []byte) (url string, value []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", nil, false
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", nil, false
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[:m])
			switch num {
			case 1:
				url = string(v)
			case 2:
				value = v
			}
		}
		b = b[m:]
	}
	return url, value, true
}

type pathSeg struct {
	kind  byte // 'f' field, 'i' list index, 'k' map key
	name  string
	index int
}

type anyWalker struct {
	f    func(string, func() string)
	segs []pathSeg
}

func (w *anyWalker) path() string {
	var b strings.Builder
	for _, s := range w.segs {
		switch s.kind {
		case 'i':
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case 'k':
			b.WriteString("[" + strconv.Quote(s.name) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		}
	}
	return b.String()
}

func (w *anyWalker) message(b []byte, md protoreflect.MessageDescriptor, depth int) {
	if depth > maxNesting {
		return
	}
	if md.FullName() == anyName {
		url, value, ok := AnyFields(b)
		if !ok {
			return
		}
		w.f(url, w.path)
		if mt, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil && Holds(mt.Descriptor()) {
			w.message(value, mt.Descriptor(), depth+1)
		}
		return
	}
	fields := md.Fields()
	var lists []struct {
		num protowire.Number
		n   int
	}
	BytesFields(b, func(num protowire.Number, v []byte) {
		fd := fields.ByNumber(num)
		if fd == nil {
			return
		}
		kid := fd.Message()
		if fd.IsMap() {
			kid = fd.MapValue().Message()
		}
		if !Holds(kid) {
			return
		}
		w.segs = append(w.segs, pathSeg{kind: 'f', name: string(fd.Name())})
		switch {
		case fd.IsList():
			i := 0
			for i < len(lists) && lists[i].num != num {
				i++
			}
			if i == len(lists) {
				lists = append(lists, struct {
					num protowire.Number
					n   int
				}{num: num})
			}
			w.segs = append(w.segs, pathSeg{kind: 'i', index: lists[i].n})
			lists[i].n++
			w.message(v, kid, depth+1)
			w.segs = w.segs[:len(w.segs)-1]
		case fd.IsMap():
			key, val := MapEntry(v, fd)
			w.segs = append(w.segs, pathSeg{kind: 'k', name: key})
			w.message(val, kid, depth+1)
			w.segs = w.segs[:len(w.segs)-1]
		default:
			w.message(v, kid, depth+1)
		}
		w.segs = w.segs[:len(w.segs)-1]
	})
}

// BytesFields calls f with the number and contents of each
// length-delimited field of the encoding b (messages, strings, bytes,
// packed lists), in order, until b ends or does not parse.
func BytesFields(b []byte, f func(num protowire.Number, v []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return
		}
		b = b[n:]
		f(num, v)
	}
}

// MapEntry returns the key of a map entry's encoding, spelled as
// protoreflect.MapKey.String does, and its value's encoding.
func MapEntry(b []byte, fd protoreflect.FieldDescriptor) (key string, val []byte) {
	var k protoreflect.Value
	switch fd.MapKey().Kind() {
	case protoreflect.StringKind:
		k = protoreflect.ValueOfString("")
	case protoreflect.BoolKind:
		k = protoreflect.ValueOfBool(false)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		k = protoreflect.ValueOfInt32(0)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		k = protoreflect.ValueOfInt64(0)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		k = protoreflect.ValueOfUint32(0)
	default:
		k = protoreflect.ValueOfUint64(0)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			break
		}
		field := b[:m]
		b = b[m:]
		switch num {
		case 1:
			k = mapKeyOf(fd.MapKey().Kind(), typ, field, k)
		case 2:
			if v, n := protowire.ConsumeBytes(field); n >= 0 && typ == protowire.BytesType {
				val = v
			}
		}
	}
	return k.MapKey().String(), val
}

// mapKeyOf decodes a map key of kind k from its encoded value, or keeps
// def if it does not decode.
func mapKeyOf(k protoreflect.Kind, typ protowire.Type, b []byte, def protoreflect.Value) protoreflect.Value {
	switch typ {
	case protowire.BytesType:
		if v, n := protowire.ConsumeBytes(b); n >= 0 && k == protoreflect.StringKind {
			return protoreflect.ValueOfString(string(v))
		}
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return def
		}
		switch k {
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(protowire.DecodeBool(v))
		case protoreflect.Int32Kind:
			return protoreflect.ValueOfInt32(int32(v))
		case protoreflect.Sint32Kind:
			return protoreflect.ValueOfInt32(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
		case protoreflect.Int64Kind:
			return protoreflect.ValueOfInt64(int64(v))
		case protoreflect.Sint64Kind:
			return protoreflect.ValueOfInt64(protowire.DecodeZigZag(v))
		case protoreflect.Uint32Kind:
			return protoreflect.ValueOfUint32(uint32(v))
		case protoreflect.Uint64Kind:
			return protoreflect.ValueOfUint64(v)
		}
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		if n < 0 {
			return def
		}
		if k == protoreflect.Sfixed32Kind {
			return protoreflect.ValueOfInt32(int32(v))
		}
		return protoreflect.ValueOfUint32(v)
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		if n < 0 {
			return def
		}
		if k == protoreflect.Sfixed64Kind {
			return protoreflect.ValueOfInt64(int64(v))
		}
		return protoreflect.ValueOfUint64(v)
	}
	return def
}
