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

// MaxNesting is how deeply the messages of an authored resource may nest in
// its encoding, the resource itself counting as the first level, a map
// entry as one and each message in it as another. Envoy and gRPC C++
// (protobuf C++ and upb) and gRPC Java all decode with protobuf's default
// recursion limit of 100 nested messages beyond the top one, so a resource
// nested deeper is NACKed by every one of them (protobuf-go's own default,
// 10000, would let xdsd accept it). The contents of a google.protobuf.Any
// are decoded on their own when a client unpacks them, so they count from 1
// again. 100 levels counting the top one keeps one level below the limit.
const MaxNesting = 100

// Validate runs the message's own protoc-gen-validate rules (ValidateAll),
// and recursively those of every google.protobuf.Any inside it that this
// binary can decode — an HttpConnectionManager in a Listener's typed_config
// gets checked too, as a real client would. It returns every failure with
// its field path.
func Validate(m proto.Message) []FieldError {
	w := walker{}
	w.validate(m, 0, 1)
	return w.out
}

// validateAuthored is Validate for a resource being authored, which also
// must not nest deeper than MaxNesting. level is the nesting level of m in
// what is served: 1 for a resource, 2 for an entry of a collection.
func validateAuthored(m proto.Message, level int) []FieldError {
	w := walker{limit: MaxNesting}
	w.validate(m, 0, level)
	return w.out
}

type allValidator interface{ ValidateAll() error }

// pathSeg is one step of a field path: a field name, a list index or a map
// key.
type pathSeg struct {
	kind  byte // 'f' field, 'i' index, 'k' map key
	name  string
	index int
}

// walker walks a message tree. It keeps the field path as a stack of steps
// and spells it out only for an error, so a walk costs time and memory
// linear in the size of the tree, whatever its depth.
type walker struct {
	out     []FieldError
	segs    []pathSeg
	limit   int  // MaxNesting, or 0 for no limit
	tooDeep bool // the limit was reported: once is enough
}

func (w *walker) path() string { return pathSegs(w.segs).String() }

func (w *walker) push(s pathSeg) { w.segs = append(w.segs, s) }
func (w *walker) pop()           { w.segs = w.segs[:len(w.segs)-1] }

// validate checks m, at nesting level level of its encoding, anys Any
// values deep.
func (w *walker) validate(m proto.Message, anys, level int) {
	if anys > 32 {
		w.out = append(w.out, FieldError{Path: w.path(), Msg: "Any values nested too deeply"})
		return
	}
	if v, ok := m.(allValidator); ok {
		if err := v.ValidateAll(); err != nil {
			walkPGV(err, w.path(), &w.out)
		}
	}
	w.fields(m.ProtoReflect(), anys, level)
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

// fields walks the message fields of m, a message at nesting level level.
func (w *walker) fields(m protoreflect.Message, anys, level int) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		w.push(pathSeg{kind: 'f', name: string(fd.Name())})
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				w.push(pathSeg{kind: 'i', index: i})
				w.message(l.Get(i).Message(), anys, level+1)
				w.pop()
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			// A map entry is a message of its own, holding the value.
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				w.push(pathSeg{kind: 'k', name: k.String()})
				w.message(mv.Message(), anys, level+2)
				w.pop()
				return true
			})
		case fd.IsMap():
			w.checkLevel(level + 1)
		case fd.Message() != nil:
			w.message(v.Message(), anys, level+1)
		}
		w.pop()
		return true
	})
}

// checkLevel reports whether a message at nesting level level is within
// the limit, reporting the first one that is not.
func (w *walker) checkLevel(level int) bool {
	if w.limit == 0 || level <= w.limit {
		return true
	}
	if !w.tooDeep {
		w.tooDeep = true
		w.out = append(w.out, FieldError{Path: w.path(), Msg: fmt.Sprintf(
			"messages nested more than %d deep: Envoy and gRPC decode no deeper (protobuf's recursion limit) and would reject the resource", w.limit)})
	}
	return false
}

func (w *walker) message(m protoreflect.Message, anys, level int) {
	if !w.checkLevel(level) {
		return
	}
	if m.Descriptor().FullName() != anyName {
		w.fields(m, anys, level)
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
	// A client decodes an Any's contents on their own: their levels count
	// from 1.
	w.validate(inner, anys+1, 1)
}
