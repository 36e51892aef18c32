// Package protowalk says which message types can hold a
// google.protobuf.Any: the walks that look into Any values (validation,
// the client checks) skip the fields that cannot lead to one.
package protowalk

import (
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

var (
	anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()
	known   sync.Map // protoreflect.FullName → bool
)

// Holds reports whether a value of type md (nil: none) can hold a
// google.protobuf.Any at any depth, itself included; computed once a type.
func Holds(md protoreflect.MessageDescriptor) bool {
	if md == nil {
		return false
	}
	if v, ok := known.Load(md.FullName()); ok {
		return v.(bool)
	}
	h := reaches(md, map[protoreflect.FullName]bool{})
	known.Store(md.FullName(), h)
	return h
}

func reaches(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md == nil || seen[md.FullName()] {
		return false
	}
	if md.FullName() == anyName {
		return true
	}
	seen[md.FullName()] = true
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		m := fd.Message()
		if fd.IsMap() {
			m = fd.MapValue().Message()
		}
		if reaches(m, seen) {
			return true
		}
	}
	return false
}
