// Package protojsonerr says where and why protojson rejects the JSON form
// of a protobuf message, from the JSON's structure and the message's
// descriptors.
//
// protojson's errors are text: the position is written into the message
// ("(line 3:5)") and protobuf-go spells its "proto:" prefix with a
// no-break space at random, precisely so that callers do not parse them.
// A caller that must place an error in an author's file (resource) or
// name the field of a bootstrap (client) needs the position and the cause
// as data, and a wording that a dependency upgrade cannot silently change.
// So after protojson has failed, Explain walks the same JSON against the
// same descriptors, in the order protojson reads it, and finds the first
// member or value protojson cannot take: an unknown or repeated field, a
// oneof set twice, a value of the wrong JSON kind, an Any of an unknown
// type. A scalar or a well-known type's value is judged by protojson
// itself, decoded alone (only whether it fails is used), so that what is
// taken stays exactly what protojson takes.
package protojsonerr

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Error is why protojson rejects a JSON text, and where.
type Error struct {
	// Offset is the byte offset in the JSON text of what is wrong: the
	// key of a member (an unknown, repeated or conflicting field) or a
	// value (one of the wrong kind).
	Offset int
	// Msg says what is wrong, in protojson's terms: unknown field "x",
	// invalid value for enum field lbPolicy: "FASTEST", and so on.
	Msg string
	// UnknownType is the type URL of a google.protobuf.Any that the
	// resolver does not know, when that is the cause ("" otherwise);
	// Offset is then the URL's.
	UnknownType string
}

func (e *Error) Error() string { return e.Msg }

// Options are the protojson.UnmarshalOptions the JSON was decoded with
// that change what it takes.
type Options struct {
	// DiscardUnknown: unknown fields are not an error.
	DiscardUnknown bool
	// Resolver resolves the type URLs of Any values; nil is
	// protoregistry.GlobalTypes.
	Resolver interface {
		protoregistry.MessageTypeResolver
		protoregistry.ExtensionTypeResolver
	}
}

// Explain returns where and why protojson (with opts) rejects js, the JSON
// of a message of type md: valid JSON in which no object repeats a key.
// It returns nil when it finds nothing wrong, which for an input that
// protojson rejects means a cause it does not model (such as nesting
// beyond protojson's recursion limit); the caller then reports the
// failure without a finer position.
func Explain(js []byte, md protoreflect.MessageDescriptor, opts Options) *Error {
	if opts.Resolver == nil {
		opts.Resolver = protoregistry.GlobalTypes
	}
	w := &walker{js: js, opts: opts}
	i := w.space(0)
	if i >= len(js) {
		return nil
	}
	if js[i] != '{' {
		if wellKnown(md) {
			return w.alone(md, i)
		}
		return w.errorf(i, "invalid value for message %s: %s (want a JSON object)", md.FullName(), w.raw(i))
	}
	return w.message(md, i, false)
}

type walker struct {
	js   []byte
	opts Options
}

func (w *walker) errorf(off int, format string, args ...any) *Error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// raw returns the text of the value at js[i], shortened past 80 bytes.
func (w *walker) raw(i int) string {
	s := string(w.js[i:w.skip(i)])
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// wellKnown reports whether md has a JSON form of its own (protojson's
// well-known types), other than google.protobuf.Any.
func wellKnown(md protoreflect.MessageDescriptor) bool {
	if md.ParentFile() == nil || md.ParentFile().Package() != "google.protobuf" {
		return false
	}
	switch md.Name() {
	case "Duration", "Timestamp", "FieldMask", "Struct", "Value", "ListValue", "Empty",
		"BoolValue", "Int32Value", "Int64Value", "UInt32Value", "UInt64Value",
		"FloatValue", "DoubleValue", "StringValue", "BytesValue":
		return true
	}
	return false
}

func isAny(md protoreflect.MessageDescriptor) bool {
	return md.FullName() == "google.protobuf.Any"
}

// fails reports whether protojson rejects json as a message of type md.
// Only the failure is used, never its text.
func (w *walker) fails(md protoreflect.MessageDescriptor, json []byte) bool {
	var m protoreflect.ProtoMessage
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err == nil && mt.Descriptor() == md {
		m = mt.New().Interface()
	} else {
		m = dynamicpb.NewMessage(md)
	}
	o := protojson.UnmarshalOptions{DiscardUnknown: w.opts.DiscardUnknown, Resolver: w.opts.Resolver}
	return o.Unmarshal(json, m) != nil
}

// alone judges the value at js[i] of a well-known type md by decoding it
// alone.
func (w *walker) alone(md protoreflect.MessageDescriptor, i int) *Error {
	if !w.fails(md, w.js[i:w.skip(i)]) {
		return nil
	}
	return w.errorf(i, "invalid %s value %s%s", md.FullName(), w.raw(i), wellKnownHint(md))
}

// member is one member of a JSON object: where its key and value start,
// and where the value ends.
type member struct {
	key            string
	keyOff, valOff int
	valEnd         int
}

// message finds the first problem in the object at js[i] (a '{') read as
// a message of type md; with skipType, its "@type" member belongs to an
// enclosing Any.
func (w *walker) message(md protoreflect.MessageDescriptor, i int, skipType bool) *Error {
	if isAny(md) {
		return w.any(i)
	}
	if wellKnown(md) {
		return w.alone(md, i)
	}
	fields := md.Fields()
	seen := map[protoreflect.FieldNumber]bool{}
	oneofs := map[protoreflect.FullName]bool{}
	for _, m := range w.members(i) {
		if skipType && m.key == "@type" {
			continue
		}
		var fd protoreflect.FieldDescriptor
		if n := len(m.key); n >= 2 && m.key[0] == '[' && m.key[n-1] == ']' {
			xt, err := w.opts.Resolver.FindExtensionByName(protoreflect.FullName(m.key[1 : n-1]))
			if err == nil {
				fd = xt.TypeDescriptor()
				if !md.ExtensionRanges().Has(fd.Number()) || fd.ContainingMessage().FullName() != md.FullName() {
					return w.errorf(m.keyOff, "message %s cannot be extended by %s", md.FullName(), fd.FullName())
				}
			}
		} else if fd = fields.ByJSONName(m.key); fd == nil {
			fd = fields.ByTextName(m.key)
		}
		if fd == nil {
			if w.opts.DiscardUnknown {
				continue
			}
			return w.errorf(m.keyOff, "unknown field %s%s", w.js[m.keyOff:w.skip(m.keyOff)], unknownFieldHint(md, m.key))
		}
		if seen[fd.Number()] {
			return w.errorf(m.keyOff, "duplicate field %s (a field may be written once, by its name or its JSON name)", w.js[m.keyOff:w.skip(m.keyOff)])
		}
		seen[fd.Number()] = true
		if w.isNull(m.valOff) && !acceptsNull(fd) {
			continue
		}
		if od := fd.ContainingOneof(); od != nil && !fd.IsList() && !fd.IsMap() {
			if oneofs[od.FullName()] {
				return w.errorf(m.keyOff, "error parsing %s, oneof %s is already set", w.js[m.keyOff:w.skip(m.keyOff)], od.FullName())
			}
			oneofs[od.FullName()] = true
		}
		var e *Error
		switch {
		case fd.IsList():
			e = w.list(md, fd, m)
		case fd.IsMap():
			e = w.mapField(md, fd, m)
		default:
			e = w.singular(md, fd, m)
		}
		if e != nil {
			return e
		}
	}
	return nil
}

// acceptsNull reports whether protojson reads a null as a value of fd
// rather than as the field left out.
func acceptsNull(fd protoreflect.FieldDescriptor) bool {
	if md := fd.Message(); md != nil {
		return md.FullName() == "google.protobuf.Value"
	}
	if ed := fd.Enum(); ed != nil {
		return ed.FullName() == "google.protobuf.NullValue"
	}
	return false
}

// singular checks the value of a field that is neither a list nor a map.
func (w *walker) singular(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, m member) *Error {
	if fmd := fd.Message(); fmd != nil {
		if w.js[m.valOff] == '{' && !wellKnown(fmd) {
			return w.message(fmd, m.valOff, false)
		}
		if !wellKnown(fmd) {
			return w.errorf(m.valOff, "invalid value for message field %s: %s (want a JSON object)", fd.JSONName(), w.raw(m.valOff))
		}
		return w.alone(fmd, m.valOff)
	}
	return w.scalar(md, fd, m.valOff, w.wrap(m, w.js[m.valOff:m.valEnd]))
}

// wrap returns the one-member object of m's key and the value v.
func (w *walker) wrap(m member, v []byte) []byte {
	key := w.js[m.keyOff:w.skip(m.keyOff)]
	b := make([]byte, 0, len(key)+len(v)+3)
	b = append(b, '{')
	b = append(b, key...)
	b = append(b, ':')
	b = append(b, v...)
	return append(b, '}')
}

// scalar judges a scalar value at js[off] of field fd, written alone in
// the object one (a message of type md).
func (w *walker) scalar(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, off int, one []byte) *Error {
	if !w.fails(md, one) {
		return nil
	}
	hint := ""
	if ed := fd.Enum(); ed != nil {
		hint = enumHint(ed, w.raw(off))
	}
	return w.errorf(off, "invalid value for %s field %s: %s%s", fd.Kind(), fd.JSONName(), w.raw(off), hint)
}

// list checks the value of a repeated field.
func (w *walker) list(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, m member) *Error {
	if w.js[m.valOff] != '[' {
		return w.errorf(m.valOff, "invalid value for repeated field %s: %s (want a JSON array)", fd.JSONName(), w.raw(m.valOff))
	}
	fmd := fd.Message()
	for _, e := range w.elements(m.valOff) {
		if fmd != nil && w.js[e] == '{' && !wellKnown(fmd) {
			if err := w.message(fmd, e, false); err != nil {
				return err
			}
			continue
		}
		one := w.wrap(m, append(append([]byte{'['}, w.js[e:w.skip(e)]...), ']'))
		if !w.fails(md, one) {
			continue
		}
		switch {
		case fmd == nil && fd.Enum() != nil:
			return w.errorf(e, "invalid value for %s field %s: %s%s", fd.Kind(), fd.JSONName(), w.raw(e), enumHint(fd.Enum(), w.raw(e)))
		case fmd == nil:
			return w.errorf(e, "invalid value for %s field %s: %s", fd.Kind(), fd.JSONName(), w.raw(e))
		case wellKnown(fmd):
			return w.errorf(e, "invalid %s value %s%s", fmd.FullName(), w.raw(e), wellKnownHint(fmd))
		default:
			return w.errorf(e, "invalid value for message field %s: %s (want a JSON object)", fd.JSONName(), w.raw(e))
		}
	}
	return nil
}

// mapField checks the value of a map field.
func (w *walker) mapField(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, m member) *Error {
	if w.js[m.valOff] != '{' {
		return w.errorf(m.valOff, "invalid value for map field %s: %s (want a JSON object)", fd.JSONName(), w.raw(m.valOff))
	}
	kd, vd := fd.MapKey(), fd.MapValue()
	for _, e := range w.members(m.valOff) {
		if !mapKeyOK(kd.Kind(), e.key) {
			return w.errorf(e.keyOff, "invalid value for %s key: %s", kd.Kind(), w.js[e.keyOff:w.skip(e.keyOff)])
		}
		if w.isNull(e.valOff) && !acceptsNull(vd) {
			// protojson takes null for no map value only where null is a value.
			return w.errorf(e.valOff, "invalid value for map field %s: null (a map entry needs a value)", fd.JSONName())
		}
		vmd := vd.Message()
		if vmd != nil && w.js[e.valOff] == '{' && !wellKnown(vmd) {
			if err := w.message(vmd, e.valOff, false); err != nil {
				return err
			}
			continue
		}
		entry := append(append(append([]byte{'{'}, w.js[e.keyOff:w.skip(e.keyOff)]...), ':'), w.js[e.valOff:e.valEnd]...)
		if !w.fails(md, w.wrap(m, append(entry, '}'))) {
			continue
		}
		switch {
		case vmd == nil:
			return w.errorf(e.valOff, "invalid value for %s field %s: %s", vd.Kind(), fd.JSONName(), w.raw(e.valOff))
		case wellKnown(vmd):
			return w.errorf(e.valOff, "invalid %s value %s", vmd.FullName(), w.raw(e.valOff))
		default:
			return w.errorf(e.valOff, "invalid value for message field %s: %s (want a JSON object)", fd.JSONName(), w.raw(e.valOff))
		}
	}
	return nil
}

// mapKeyOK reports whether protojson takes s as a map key of kind k.
func mapKeyOK(k protoreflect.Kind, s string) bool {
	var err error
	switch k {
	case protoreflect.BoolKind:
		return s == "true" || s == "false"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		_, err = strconv.ParseInt(s, 10, 32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		_, err = strconv.ParseInt(s, 10, 64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		_, err = strconv.ParseUint(s, 10, 32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		_, err = strconv.ParseUint(s, 10, 64)
	}
	return err == nil
}

// any checks the object at js[i] read as a google.protobuf.Any: "@type"
// names a type the resolver knows, and the rest is a message of that type
// (or, for a well-known type, its "value").
func (w *walker) any(i int) *Error {
	ms := w.members(i)
	if len(ms) == 0 {
		return nil
	}
	var tm *member
	for k := range ms {
		if ms[k].key == "@type" {
			tm = &ms[k]
			break
		}
	}
	if tm == nil {
		return w.errorf(i, `missing "@type" field (an Any names the type of what it holds)`)
	}
	if w.js[tm.valOff] != '"' {
		return w.errorf(tm.valOff, "@type field value is not a string: %s", w.raw(tm.valOff))
	}
	url := unquote(w.js[tm.valOff:tm.valEnd])
	if url == "" {
		return w.errorf(tm.valOff, "@type field contains empty value")
	}
	mt, err := w.opts.Resolver.FindMessageByURL(url)
	if err != nil {
		return &Error{Offset: tm.valOff, Msg: fmt.Sprintf("unknown type %q", url), UnknownType: url}
	}
	md := mt.Descriptor()
	if !wellKnown(md) && !isAny(md) {
		return w.message(md, i, true)
	}
	var vm *member
	for k, m := range ms {
		switch m.key {
		case "@type":
		case "value":
			vm = &ms[k]
		default:
			return w.errorf(m.keyOff, "unknown field %s%s", w.js[m.keyOff:w.skip(m.keyOff)], unknownFieldHint(md, m.key))
		}
	}
	if vm == nil {
		return w.errorf(i, `missing "value" field (an Any holding a %s writes it as "value")`, md.FullName())
	}
	if isAny(md) && w.js[vm.valOff] == '{' {
		return w.any(vm.valOff)
	}
	return w.alone(md, vm.valOff)
}
