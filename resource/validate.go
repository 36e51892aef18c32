package resource

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// FieldError is one validation failure inside a message.
type FieldError struct {
	Path string // proto field path, snake_case, e.g. filter_chains[0].filters[0]
	Msg  string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Validate runs the message's own protoc-gen-validate rules (ValidateAll),
// and recursively those of every google.protobuf.Any inside it that this
// binary can decode — an HttpConnectionManager in a Listener's typed_config
// gets checked too, as a real client would. It returns every failure with
// its field path.
func Validate(m proto.Message) []FieldError {
	var out []FieldError
	validateInto(m, "", &out, 0)
	return out
}

type allValidator interface{ ValidateAll() error }

func validateInto(m proto.Message, prefix string, out *[]FieldError, depth int) {
	if depth > 32 {
		*out = append(*out, FieldError{Path: prefix, Msg: "Any values nested too deeply"})
		return
	}
	if v, ok := m.(allValidator); ok {
		if err := v.ValidateAll(); err != nil {
			walkPGV(err, prefix, out)
		}
	}
	walkAnys(m.ProtoReflect(), prefix, out, depth)
}

// pgvError is the shape of every protoc-gen-validate error type.
type pgvError interface {
	Field() string
	Reason() string
	Cause() error
}

type multiError interface{ AllErrors() []error }

func walkPGV(err error, prefix string, out *[]FieldError) {
	var me multiError
	if errors.As(err, &me) {
		for _, e := range me.AllErrors() {
			walkPGV(e, prefix, out)
		}
		return
	}
	var pe pgvError
	if !errors.As(err, &pe) {
		*out = append(*out, FieldError{Path: prefix, Msg: err.Error()})
		return
	}
	path := joinPath(prefix, snakeField(pe.Field()))
	if c := pe.Cause(); c != nil {
		var cpe pgvError
		var cme multiError
		if errors.As(c, &cpe) || errors.As(c, &cme) {
			walkPGV(c, path, out)
			return
		}
		*out = append(*out, FieldError{Path: path, Msg: pe.Reason() + ": " + c.Error()})
		return
	}
	*out = append(*out, FieldError{Path: path, Msg: pe.Reason()})
}

// snakeField turns PGV's Go field names ("VirtualHosts[0]") into proto
// field paths ("virtual_hosts[0]").
func snakeField(f string) string {
	name, rest := f, ""
	if i := strings.IndexByte(f, '['); i >= 0 {
		name, rest = f[:i], f[i:]
	}
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String() + rest
}

var anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()

func walkAnys(m protoreflect.Message, prefix string, out *[]FieldError, depth int) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := joinPath(prefix, string(fd.Name()))
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				walkMessage(l.Get(i).Message(), fmt.Sprintf("%s[%d]", path, i), out, depth)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				walkMessage(mv.Message(), fmt.Sprintf("%s[%q]", path, k.String()), out, depth)
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			walkMessage(v.Message(), path, out, depth)
		}
		return true
	})
}

func walkMessage(m protoreflect.Message, path string, out *[]FieldError, depth int) {
	if m.Descriptor().FullName() != anyName {
		walkAnys(m, path, out, depth)
		return
	}
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		return
	}
	inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
	if err != nil {
		// An Any this binary cannot decode is passed through unchecked; the
		// authoring decoder has already rejected unknown types.
		return
	}
	validateInto(inner, path, out, depth+1)
}
