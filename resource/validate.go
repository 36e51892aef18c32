package resource

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/internal/docprep"
	"github.com/xdsd/xdsd/internal/protowalk"
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
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
	if err != nil {
		return []FieldError{{Msg: err.Error()}}
	}
	return validateAuthored(m, b, 1, 0)
}

// validateAuthored is Validate for a resource being authored, which also
// must not nest deeper than limit (MaxNesting, or 0 when the caller knows
// it cannot). level is the nesting level of m in what is served: 1 for a
// resource, 2 for an entry of a collection. b is m's encoding.
func validateAuthored(m proto.Message, b []byte, level, limit int) []FieldError {
	out, _ := validateKeeping(m, b, level, limit, false)
	return out
}

// validateKeeping is validateAuthored, which also returns, if keep, the
// contents of the Any values it decoded.
func validateKeeping(m proto.Message, b []byte, level, limit int, keep bool) ([]FieldError, *docprep.Anys) {
	w := walkers.Get().(*walker)
	*w = walker{limit: limit}
	if keep {
		w.anys = &docprep.Anys{}
	}
	w.segs = w.seg0[:0]
	w.validate(m, b, 0, level)
	out, anys := w.out, w.anys
	w.out, w.segs, w.anys = nil, nil, nil
	walkers.Put(w)
	return out, anys
}

// walkers are reused: a walker is larger than most documents' findings.
var walkers = sync.Pool{New: func() any { return new(walker) }}

type allValidator interface{ ValidateAll() error }

// pathSeg is one step of a field path: a field name, a list index or a map
// key.
type pathSeg struct {
	kind  byte // 'f' field, 'i' index, 'k' map key
	name  string
	index int
}

// walker walks a message tree. It walks the tree's encoding, which is
// several times faster than walking the message by reflection, and
// decodes only the contents of google.protobuf.Any values, which it must
// hand to their validators. It keeps the field path as a stack of steps
// and spells it out only for an error, so a walk costs time and memory
// linear in the size of the tree, whatever its depth.
type walker struct {
	out     []FieldError
	segs    []pathSeg
	limit   int           // MaxNesting, or 0 for no limit
	tooDeep bool          // the limit was reported: once is enough
	anys    *docprep.Anys // the Any values decoded, when kept
	seg0    [16]pathSeg
}

func (w *walker) path() string { return pathSegs(w.segs).String() }

func (w *walker) push(s pathSeg) { w.segs = append(w.segs, s) }
func (w *walker) pop()           { w.segs = w.segs[:len(w.segs)-1] }

// validate checks m, whose encoding is b, at nesting level level of its
// encoding, anys Any values deep.
func (w *walker) validate(m proto.Message, b []byte, anys, level int) {
	if anys > 32 {
		w.out = append(w.out, FieldError{Path: w.path(), Msg: "Any values nested too deeply"})
		return
	}
	if v, ok := m.(allValidator); ok {
		if err := v.ValidateAll(); err != nil {
			walkPGV(err, w.path(), &w.out)
		}
	}
	w.fields(b, shapeOf(m.ProtoReflect().Descriptor()), anys, level)
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

// fields walks the message fields of the encoding b of a message of type
// md at nesting level level, skipping those whose type can hold no Any and
// cannot nest past the limit from there: most of a resource, walked in a
// fraction of the time. The encoding is proto.Marshal's (or what the
// wire format allows), and one that does not parse is left alone: it
// came from a message.
func (w *walker) fields(b []byte, sh *shape, anys, level int) {
	if len(sh.fields) == 0 {
		return
	}
	var counts [16]int // elements seen of each repeated field, for their paths
	seen := counts[:]
	if sh.lists > len(counts) {
		seen = make([]int, sh.lists)
	}
	// The loop of protowalk.BytesFields, written out: a call through a
	// func value for each field cost this walk 2 % of a document's
	// decoding.
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
		i := sh.index(num)
		if i < 0 {
			continue
		}
		fd, c := sh.fields[i], sh.kids[i]
		if !c.hasAny && (w.limit == 0 || c.depth >= 0 && level+c.depth <= w.limit) {
			continue
		}
		w.push(pathSeg{kind: 'f', name: string(fd.Name())})
		switch {
		case fd.IsList():
			at := &seen[sh.listAt[i]]
			w.push(pathSeg{kind: 'i', index: *at})
			*at++
			w.message(v, c, anys, level+1)
			w.pop()
		case fd.IsMap() && fd.MapValue().Message() != nil:
			// A map entry is a message of its own, holding the value.
			key, val := protowalk.MapEntry(v, fd)
			w.push(pathSeg{kind: 'k', name: key})
			w.message(val, c, anys, level+2)
			w.pop()
		case fd.IsMap():
			w.checkLevel(level + 1)
		default:
			w.message(v, c, anys, level+1)
		}
		w.pop()
	}
}

// shape is what the walker needs to know of a message type: its fields
// that hold messages (map entries included), with what each can hold.
type shape struct {
	fields []protoreflect.FieldDescriptor
	kids   []*shape
	// byNum indexes fields by number: byNum[n] is 1 + the index of field
	// n, 0 for none (numbers past its end are looked up in fields).
	byNum []int16
	// hasAny: a value of the type can hold a google.protobuf.Any.
	hasAny bool
	// depth is how many levels a value of the field's type can add to
	// the nesting, counted from the level of the message holding it; -1
	// when unbounded (a recursive type, such as google.protobuf.Struct).
	depth int
	// isAny: the type is google.protobuf.Any.
	isAny bool
	// listAt[i] is the index of fields[i] among the repeated fields, -1
	// if it is not one; lists is how many there are.
	listAt []int16
	lists  int
	// Of a field's entry in kids: its message type, and that type's
	// shape once looked up (resolve).
	msg  protoreflect.MessageDescriptor
	full atomic.Pointer[shape]
}

// resolve returns the shape of the message type of a field's entry in
// kids.
func (k *shape) resolve() *shape {
	if sh := k.full.Load(); sh != nil {
		return sh
	}
	sh := shapeOf(k.msg)
	k.full.Store(sh)
	return sh
}

var (
	shapeCache sync.Map   // protoreflect.FullName → *shape
	shapesMu   sync.Mutex // guards shapes, where they are computed
	shapes     = map[protoreflect.FullName]*shape{}
)

// shapeOf returns the shape of a message type, computed once.
func shapeOf(md protoreflect.MessageDescriptor) *shape {
	if sh, ok := shapeCache.Load(md.FullName()); ok {
		return sh.(*shape)
	}
	shapesMu.Lock()
	defer shapesMu.Unlock()
	sh := shapeLocked(md, map[protoreflect.FullName]bool{})
	shapeCache.Store(md.FullName(), sh)
	return sh
}

func shapeLocked(md protoreflect.MessageDescriptor, visiting map[protoreflect.FullName]bool) *shape {
	if sh, ok := shapes[md.FullName()]; ok {
		return sh
	}
	if visiting[md.FullName()] {
		return nil // a cycle: the caller marks itself unbounded
	}
	visiting[md.FullName()] = true
	defer delete(visiting, md.FullName())
	sh := &shape{hasAny: protowalk.Holds(md), isAny: md.FullName() == anyName}
	deepest, unbounded, complete := 0, false, true
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		var (
			kid   *shape
			extra int // levels the field adds besides its message's own
		)
		switch {
		case fd.IsMap() && fd.MapValue().Message() != nil:
			kid, extra = shapeLocked(fd.MapValue().Message(), visiting), 1
		case fd.IsMap():
			kid = &shape{depth: 1} // the entry alone
		case fd.Message() != nil:
			kid = shapeLocked(fd.Message(), visiting)
		default:
			continue
		}
		k := &shape{depth: -1, msg: fieldMessage(fd)} // as seen from md
		if kid != nil {
			k.hasAny, k.depth = kid.hasAny, kid.depth
		} else {
			// Part of a cycle whose shape is not known yet: unbounded, and
			// this shape is only provisional, so it is not kept.
			complete = false
			k.hasAny = protowalk.Holds(fieldMessage(fd))
		}
		if k.depth >= 0 {
			k.depth += extra
			deepest = max(deepest, k.depth)
		} else {
			unbounded = true
		}
		sh.fields = append(sh.fields, fd)
		sh.kids = append(sh.kids, k)
	}
	sh.listAt = make([]int16, len(sh.fields))
	for i, fd := range sh.fields {
		sh.listAt[i] = -1
		if fd.IsList() {
			sh.listAt[i] = int16(sh.lists)
			sh.lists++
		}
		if n := int(fd.Number()); n < 256 {
			if n >= len(sh.byNum) {
				sh.byNum = append(sh.byNum, make([]int16, n+1-len(sh.byNum))...)
			}
			sh.byNum[n] = int16(i + 1)
		}
	}
	sh.depth = 1 + deepest
	if unbounded {
		sh.depth = -1
	}
	if complete {
		shapes[md.FullName()] = sh
	}
	return sh
}

// index returns the index in fields of field number n, or -1.
func (sh *shape) index(n protowire.Number) int {
	if int(n) < len(sh.byNum) {
		return int(sh.byNum[n]) - 1
	}
	for i, fd := range sh.fields {
		if fd.Number() == n {
			return i
		}
	}
	return -1
}

// fieldMessage is the message a field holds: its own, or its map's value.
func fieldMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		return fd.MapValue().Message()
	}
	return fd.Message()
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

// message walks the encoding b of a message of kid's type (an entry of
// kids) at nesting level level.
func (w *walker) message(b []byte, kid *shape, anys, level int) {
	if !w.checkLevel(level) {
		return
	}
	sh := kid.resolve()
	if !sh.isAny {
		w.fields(b, sh, anys, level)
		return
	}
	url, value, ok := protowalk.AnyFields(b)
	if !ok {
		return
	}
	// As anypb.UnmarshalNew. An Any this binary cannot decode is passed
	// through unchecked; the authoring decoder has already rejected
	// unknown types.
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err != nil {
		return
	}
	inner := mt.New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(value, inner); err != nil {
		return
	}
	if w.anys != nil {
		w.anys.Keep(url, value, inner)
	}
	// A client decodes an Any's contents on their own: their levels count
	// from 1.
	w.validate(inner, value, anys+1, 1)
}
