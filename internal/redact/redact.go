// Package redact keeps secrets out of what xdsd shows: the fields the
// Envoy API marks with the option (udpa.annotations.sensitive) = true —
// private keys, HMAC secrets, passwords — are replaced by a digest in
// admin outputs, CSDS answers and logs. Envoy's own config dump does the
// same (https://www.envoyproxy.io/docs/envoy/latest/operations/admin,
// "sensitive" fields). The digest lets an operator tell whether two
// copies hold the same secret without seeing it.
//
// The digest is an HMAC-SHA256 under a secret key, not a plain hash: a
// plain hash of a password can be tested offline against guesses by
// anyone who reads it. xdsd serve keeps the key in its store
// (store.Keyring), so replicas sharing a store agree on digests and they
// stay the same across restarts; a process that has no store (a relay,
// xdsd get) uses a random key of its own, so its digests differ from the
// server's and from one run to the next.
//
// Resources are served over xDS unchanged: only clients the policy allows
// receive them.
package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/cncf/xds/go/udpa/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// key is the HMAC key of digests: random per process until SetKey.
var key atomic.Pointer[[]byte]

func init() {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	key.Store(&k)
}

// SetKey sets the key of every digest the process makes from now on (xdsd
// serve: the store's). An empty key is ignored.
func SetKey(k []byte) {
	if len(k) == 0 {
		return
	}
	c := append([]byte(nil), k...)
	key.Store(&c)
}

// Digest is what replaces a secret value: "[redacted hmac:…]" with the
// first 12 bytes of the value's HMAC-SHA256 under the process's key.
func Digest(b []byte) string {
	m := hmac.New(sha256.New, *key.Load())
	m.Write(b)
	return "[redacted hmac:" + hex.EncodeToString(m.Sum(nil)[:12]) + "]"
}

// Message returns m with every sensitive field replaced by its digest —
// a copy when there was anything to replace, m itself otherwise (so the
// common case, nothing secret, costs a walk and no copy). Messages packed
// in google.protobuf.Any fields are unpacked, redacted and packed again;
// an Any whose type is unknown is left as it is.
func Message(m proto.Message) proto.Message {
	if m == nil || !mayHold(m.ProtoReflect().Descriptor()) {
		return m
	}
	c := proto.Clone(m)
	if redact(c.ProtoReflect()) {
		return c
	}
	return m
}

// redact replaces the sensitive fields of m in place; it reports whether
// it changed anything.
func redact(m protoreflect.Message) bool {
	if !mayHold(m.Descriptor()) {
		return false
	}
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		return redactAny(m)
	}
	changed := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if sensitive(fd) {
			m.Set(fd, hide(m, fd, v))
			changed = true
			return true
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				changed = redact(l.Get(i).Message()) || changed
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				changed = redact(mv.Message()) || changed
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			changed = redact(v.Message()) || changed
		}
		return true
	})
	return changed
}

func redactAny(m protoreflect.Message) bool {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return false
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		return false
	}
	if !redact(inner.ProtoReflect()) {
		return false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		return false
	}
	a.Value = b
	return true
}

// hide is the value that replaces sensitive field fd's value v: each
// string or bytes in it becomes its digest, other scalars their zero; a
// message keeps its shape with its strings and bytes replaced.
func hide(parent protoreflect.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch {
	case fd.IsList():
		nl := parent.NewField(fd).List()
		l := v.List()
		for i := 0; i < l.Len(); i++ {
			nl.Append(hideScalar(fd, l.Get(i)))
		}
		return protoreflect.ValueOfList(nl)
	case fd.IsMap():
		nm := parent.NewField(fd).Map()
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			nm.Set(k, hideScalar(fd.MapValue(), mv))
			return true
		})
		return protoreflect.ValueOfMap(nm)
	}
	return hideScalar(fd, v)
}

func hideScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(Digest([]byte(v.String())))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(Digest(v.Bytes())))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m := v.Message()
		c := proto.Clone(m.Interface()).ProtoReflect()
		hideAll(c)
		return protoreflect.ValueOfMessage(c)
	}
	return fd.Default()
}

// hideAll replaces every string and bytes value in m (a sensitive
// message field) by its digest, and zeroes the other scalars.
func hideAll(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		m.Set(fd, hide(m, fd, v))
		return true
	})
}

func sensitive(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	if opts == nil {
		return false
	}
	s, _ := proto.GetExtension(opts, annotations.E_Sensitive).(bool)
	return s
}

// mayHold reports whether messages of md can hold a sensitive field:
// one of their own, one reachable through message fields, or any Any
// (its contents are known only at run time). It is worked out once per
// message type.
func mayHold(md protoreflect.MessageDescriptor) bool {
	if v, ok := holds.Load(md.FullName()); ok {
		return v.(bool)
	}
	r := reach(md, map[protoreflect.FullName]bool{})
	holds.Store(md.FullName(), r)
	return r
}

var holds sync.Map // protoreflect.FullName → bool

func reach(md protoreflect.MessageDescriptor, visiting map[protoreflect.FullName]bool) bool {
	if md.FullName() == "google.protobuf.Any" {
		return true
	}
	if v, ok := holds.Load(md.FullName()); ok {
		return v.(bool)
	}
	if visiting[md.FullName()] {
		return false // a cycle: decided by the other fields
	}
	visiting[md.FullName()] = true
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if sensitive(fd) {
			return true
		}
		sub := fd.Message()
		if fd.IsMap() {
			sub = fd.MapValue().Message()
		}
		if sub != nil && reach(sub, visiting) {
			return true
		}
	}
	return false
}
