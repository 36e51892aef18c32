package resource_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/resource"
)

// TestBuiltinNameFields checks what Register checks of each type it is
// given, for the built-in types, which are registered without it (their
// messages' fields are read only when used): the name field each names
// is a string field of its message.
func TestBuiltinNameFields(t *testing.T) {
	types := resource.Types()
	if len(types) == 0 {
		t.Fatal("no built-in types")
	}
	for _, typ := range types {
		if typ.NameField == "" {
			continue
		}
		fd := typ.MessageType().Descriptor().Fields().ByName(protoreflect.Name(typ.NameField))
		if fd == nil || fd.Kind() != protoreflect.StringKind {
			t.Errorf("%s: name field %q: %v, want a string field", typ.Name, typ.NameField, fd)
		}
	}
}

// Register still refuses, at once, a name field its message lacks.
func TestRegisterChecksNameField(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("Register of a type with a name field its message lacks did not panic")
		}
	}()
	resource.Register(&resource.Type{NameField: "no_such_field", Aliases: []string{"test-no-such-field"}}, &durationpb.Duration{})
}
