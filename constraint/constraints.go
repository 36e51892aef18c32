package constraint

import (
	"slices"
	"strings"
)

// MaxDepth bounds how deeply an expression may nest, counted the way the
// proto nests messages (a leaf is one level, each NOT, AND or OR adds one).
// Parse and FromProto enforce it so that hostile input cannot exhaust the
// stack, and so that anything one of them accepts the other accepts too.
// Expressions built with And, Or and Not are not limited, but deeper ones
// will not survive a round trip through text or proto.
const MaxDepth = 64

// Params are the dynamic parameters a subscriber sends (TP2
// ResourceLocator.dynamic_parameters). A nil Params is the empty set.
type Params map[string]string

// op is the operator of a canonical node. The constant true is not an op:
// it is represented by the nil node, so that the zero Constraints means
// "unconstrained" without any initialisation.
type op uint8

const (
	opFalse op = iota + 1
	opValue
	opExists
	opNot
	opAnd
	opOr
)

// node is one canonical (sub)expression. Nodes are never mutated after
// construction, which is what lets Constraints share them freely and compute
// text and depth exactly once.
type node struct {
	op    op
	key   string  // opValue, opExists
	value string  // opValue
	kids  []*node // opNot: one operand; opAnd, opOr: ≥2 operands sorted by text
	text  string  // canonical text syntax, also the canonical key
	depth int     // nesting depth as proto messages
}

// falseNode is shared because false has exactly one canonical form.
var falseNode = &node{op: opFalse, text: "false", depth: 1}

// Constraints is an immutable TP2 constraint expression in canonical form.
// The zero value is "unconstrained": it matches every parameter set, and is
// what a resource without constraints has. Values are cheap to copy and safe
// for concurrent use.
type Constraints struct {
	n *node // nil is the constant true
}

// Value is the constraint `key=value`: true iff the key is present with
// exactly that value. It panics if key is empty, because neither the text
// syntax nor FromProto accepts an empty key, so such a value could not round
// trip; treat it like a malformed literal in code.
func Value(key, value string) Constraints {
	return Constraints{valueNode(key, value)}
}

// Exists is the constraint `exists(key)`: true iff the key is present with
// any value. TP2 provides it so a server can give clients that do not yet
// send a new key an explicit default (`!exists(key)`). It panics if key is
// empty, for the same reason as Value.
func Exists(key string) Constraints {
	return Constraints{existsNode(key)}
}

// And is true iff every operand is. And() is true, the zero Constraints.
func And(cs ...Constraints) Constraints {
	ns := make([]*node, len(cs))
	for i, c := range cs {
		ns[i] = c.n
	}
	return Constraints{mkAnd(ns)}
}

// Or is true iff some operand is. Or() is the false constant, mirroring the
// proto, which spells false as an empty or_constraints list.
func Or(cs ...Constraints) Constraints {
	ns := make([]*node, len(cs))
	for i, c := range cs {
		ns[i] = c.n
	}
	return Constraints{mkOr(ns)}
}

// Not negates c.
func Not(c Constraints) Constraints {
	return Constraints{mkNot(c.n)}
}

// Selecting returns the constraints that hold for exactly the parameter
// sets that agree with p on keys: each key present in p with its value,
// each key absent from p absent. Over the keys a resource's variants
// constrain, it names p's class: every parameter set in it selects the same
// variant (or none). A server says "no variant for these parameters" with
// it (a TP2 removal naming a variant that does not exist).
func Selecting(p Params, keys []string) Constraints {
	cs := make([]Constraints, 0, len(keys))
	for _, k := range keys {
		if v, ok := p[k]; ok {
			cs = append(cs, Value(k, v))
		} else {
			cs = append(cs, Not(Exists(k)))
		}
	}
	return And(cs...)
}

// IsZero reports whether c is unconstrained (matches everything). Any
// expression that canonicalizes to true, such as an empty AND, is zero.
func (c Constraints) IsZero() bool { return c.n == nil }

// Match reports whether a subscriber sending p gets a variant carrying c.
// Keys of p that c never mentions do not matter (TP2 "Unconstrained
// Parameters"). Match does not allocate, because a server runs it for every
// subscriber on every update.
func (c Constraints) Match(p Params) bool {
	if c.n == nil {
		return true
	}
	return c.n.eval(p)
}

// Key is the canonical key: equal for every spelling of the same canonical
// expression (operand order, nesting of like operators, duplicates, double
// negation), and "" iff c is zero. TP2 makes constraints part of a
// resource's identity, so caches key variants by (name, Key).
func (c Constraints) Key() string {
	if c.n == nil {
		return ""
	}
	return c.n.text
}

// String renders c in the text syntax, canonically and with minimal
// parentheses; "" iff c is zero. Parse(c.String()) is Equal to c.
func (c Constraints) String() string { return c.Key() }

// Equal reports whether c and o have the same canonical form. It is
// syntactic, not logical: `a=1 || a!=1` is not Equal to the zero value even
// though both match everything.
func (c Constraints) Equal(o Constraints) bool { return c.Key() == o.Key() }

// Keys returns the sorted, de-duplicated parameter keys c mentions. TP2
// requires every variant of a resource to constrain the same set of keys, and
// this is the set compared. The slice is the caller's to keep.
func (c Constraints) Keys() []string {
	if c.n == nil {
		return nil
	}
	var keys []string
	c.n.walkKeys(func(k string) { keys = append(keys, k) })
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Values returns, for each key c mentions, the values it compares the key
// with, sorted and de-duplicated; a key only tested with exists() maps to
// no values. With "absent", these are all the values of the key that c
// can tell apart: any other value behaves as one of them would. The map is
// the caller's to keep.
func (c Constraints) Values() map[string][]string {
	out := map[string][]string{}
	if c.n == nil {
		return out
	}
	var walk func(n *node)
	walk = func(n *node) {
		switch n.op {
		case opValue:
			out[n.key] = append(out[n.key], n.value)
		case opExists:
			if _, ok := out[n.key]; !ok {
				out[n.key] = nil
			}
		case opNot, opAnd, opOr:
			for _, k := range n.kids {
				walk(k)
			}
		}
	}
	walk(c.n)
	for k, vs := range out {
		slices.Sort(vs)
		out[k] = slices.Compact(vs)
	}
	return out
}

// MarshalText implements encoding.TextMarshaler with the text syntax, so
// Constraints can sit directly in JSON and YAML documents.
func (c Constraints) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with Parse.
func (c *Constraints) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

func (n *node) eval(p Params) bool {
	switch n.op {
	case opValue:
		v, ok := p[n.key]
		return ok && v == n.value
	case opExists:
		_, ok := p[n.key]
		return ok
	case opNot:
		return !n.kids[0].eval(p)
	case opAnd:
		for _, k := range n.kids {
			if !k.eval(p) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if k.eval(p) {
				return true
			}
		}
		return false
	}
	return false // opFalse
}

func (n *node) walkKeys(f func(string)) {
	switch n.op {
	case opValue, opExists:
		f(n.key)
	case opNot, opAnd, opOr:
		for _, k := range n.kids {
			k.walkKeys(f)
		}
	}
}

func valueNode(key, value string) *node {
	if key == "" {
		panic("constraint: Value with an empty key")
	}
	return &node{op: opValue, key: key, value: value, text: quote(key) + "=" + quote(value), depth: 1}
}

func existsNode(key string) *node {
	if key == "" {
		panic("constraint: Exists with an empty key")
	}
	return &node{op: opExists, key: key, text: "exists(" + quote(key) + ")", depth: 1}
}

// mkNot canonicalizes a negation: constants flip and double negation
// cancels, so that NOT never wraps a constant or another NOT.
func mkNot(x *node) *node {
	switch {
	case x == nil:
		return falseNode
	case x.op == opFalse:
		return nil
	case x.op == opNot:
		return x.kids[0]
	}
	var text string
	switch x.op {
	case opValue:
		// `k!=v` is the sugar the text syntax prints for !(k=v).
		text = quote(x.key) + "!=" + quote(x.value)
	case opExists:
		text = "!" + x.text
	default:
		text = "!(" + x.text + ")"
	}
	return &node{op: opNot, kids: []*node{x}, text: text, depth: x.depth + 1}
}

// mkAnd canonicalizes a conjunction; nil operands are the constant true.
func mkAnd(xs []*node) *node {
	var ops []*node
	for _, x := range xs {
		switch {
		case x == nil: // identity
		case x.op == opFalse: // absorbing
			return falseNode
		case x.op == opAnd:
			ops = append(ops, x.kids...)
		default:
			ops = append(ops, x)
		}
	}
	return mkList(opAnd, ops, nil)
}

// mkOr canonicalizes a disjunction; nil operands are the constant true.
func mkOr(xs []*node) *node {
	var ops []*node
	for _, x := range xs {
		switch {
		case x == nil: // absorbing
			return nil
		case x.op == opFalse: // identity
		case x.op == opOr:
			ops = append(ops, x.kids...)
		default:
			ops = append(ops, x)
		}
	}
	return mkList(opOr, ops, falseNode)
}

// mkList sorts and de-duplicates flattened operands by canonical text, which
// makes the result independent of the order and multiplicity they came in.
func mkList(o op, ops []*node, identity *node) *node {
	slices.SortFunc(ops, func(a, b *node) int { return strings.Compare(a.text, b.text) })
	ops = slices.CompactFunc(ops, func(a, b *node) bool { return a.text == b.text })
	switch len(ops) {
	case 0:
		return identity
	case 1:
		return ops[0]
	}
	sep := " || "
	if o == opAnd {
		sep = " && "
	}
	var b strings.Builder
	depth := 0
	for i, x := range ops {
		if i > 0 {
			b.WriteString(sep)
		}
		// Only an OR inside an AND needs parentheses: operands are never
		// of their parent's own kind (flattened), and everything else
		// binds tighter than both.
		if o == opAnd && x.op == opOr {
			b.WriteByte('(')
			b.WriteString(x.text)
			b.WriteByte(')')
		} else {
			b.WriteString(x.text)
		}
		depth = max(depth, x.depth)
	}
	return &node{op: o, kids: slices.Clip(ops), text: b.String(), depth: depth + 1}
}
