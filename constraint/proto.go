package constraint

import (
	"fmt"
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Proto returns the canonical wire form, nil iff c is zero (a resource
// without constraints carries none). The false constant, which the proto has
// no literal for, is an empty or_constraints list. The message is freshly
// built and belongs to the caller.
func (c Constraints) Proto() *discoveryv3.DynamicParameterConstraints {
	if c.n == nil {
		return nil
	}
	return c.n.proto()
}

func (n *node) proto() *discoveryv3.DynamicParameterConstraints {
	switch n.op {
	case opValue:
		return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_Constraint{
			Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
				Key:            n.key,
				ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: n.value},
			},
		}}
	case opExists:
		return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_Constraint{
			Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
				Key: n.key,
				ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_{
					Exists: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists{},
				},
			},
		}}
	case opNot:
		return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{
			NotConstraints: n.kids[0].proto(),
		}}
	case opAnd:
		return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_AndConstraints{
			AndConstraints: n.protoList(),
		}}
	case opOr:
		return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{
			OrConstraints: n.protoList(),
		}}
	}
	// opFalse: an empty OR.
	return &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{
		OrConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{},
	}}
}

func (n *node) protoList() *discoveryv3.DynamicParameterConstraints_ConstraintList {
	l := make([]*discoveryv3.DynamicParameterConstraints, len(n.kids))
	for i, k := range n.kids {
		l[i] = k.proto()
	}
	return &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: l}
}

// FromProto converts and canonicalizes constraints received on the wire or
// authored as proto JSON; nil gives the zero value. An empty and_constraints
// list is true and an empty or_constraints list is false (docs/protocol.md §4.1,
// which TP2 leaves unspecified). It rejects, naming the field path, a message
// whose oneof is unset, a single constraint with neither value nor exists,
// an empty key, and nesting deeper than MaxDepth, because the input may come
// from an untrusted peer.
func FromProto(p *discoveryv3.DynamicParameterConstraints) (Constraints, error) {
	if p == nil {
		return Constraints{}, nil
	}
	var path []string
	n, err := fromProto(p, &path)
	if err != nil {
		return Constraints{}, err
	}
	return Constraints{n}, nil
}

// ProtoError is FromProto's error: where in the message the problem is, as a
// dotted field path from the root ("" for the root itself).
type ProtoError struct {
	Path string // e.g. and_constraints.constraints[2].not_constraints
	Msg  string
}

// Error renders `dynamic parameter constraints: at PATH: MSG`.
func (e *ProtoError) Error() string {
	if e.Path == "" {
		return "dynamic parameter constraints: " + e.Msg
	}
	return "dynamic parameter constraints: at " + e.Path + ": " + e.Msg
}

// fromProto keeps the path as a stack of segments and joins it only on
// error, so valid input costs no string building.
func fromProto(p *discoveryv3.DynamicParameterConstraints, path *[]string) (*node, error) {
	fail := func(format string, args ...any) error {
		return &ProtoError{Path: strings.Join(*path, "."), Msg: fmt.Sprintf(format, args...)}
	}
	if len(*path) >= MaxDepth {
		return nil, fail("nesting deeper than %d levels", MaxDepth)
	}
	if p == nil {
		return nil, fail("constraint type is unset")
	}
	switch t := p.GetType().(type) {
	case *discoveryv3.DynamicParameterConstraints_Constraint:
		*path = append(*path, "constraint")
		defer func() { *path = (*path)[:len(*path)-1] }()
		sc := t.Constraint
		if sc.GetKey() == "" {
			return nil, fail("key is empty")
		}
		switch v := sc.GetConstraintType().(type) {
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Value:
			return valueNode(sc.GetKey(), v.Value), nil
		case *discoveryv3.DynamicParameterConstraints_SingleConstraint_Exists_:
			return existsNode(sc.GetKey()), nil
		}
		return nil, fail("neither value nor exists is set for key %s", strconv.Quote(sc.GetKey()))
	case *discoveryv3.DynamicParameterConstraints_NotConstraints:
		*path = append(*path, "not_constraints")
		defer func() { *path = (*path)[:len(*path)-1] }()
		x, err := fromProto(t.NotConstraints, path)
		if err != nil {
			return nil, err
		}
		return mkNot(x), nil
	case *discoveryv3.DynamicParameterConstraints_AndConstraints:
		xs, err := fromProtoList("and_constraints", t.AndConstraints, path)
		if err != nil {
			return nil, err
		}
		return mkAnd(xs), nil
	case *discoveryv3.DynamicParameterConstraints_OrConstraints:
		xs, err := fromProtoList("or_constraints", t.OrConstraints, path)
		if err != nil {
			return nil, err
		}
		return mkOr(xs), nil
	}
	return nil, fail("constraint type is unset")
}

func fromProtoList(field string, l *discoveryv3.DynamicParameterConstraints_ConstraintList, path *[]string) ([]*node, error) {
	cs := l.GetConstraints()
	xs := make([]*node, len(cs))
	for i, c := range cs {
		*path = append(*path, field+".constraints["+strconv.Itoa(i)+"]")
		x, err := fromProto(c, path)
		*path = (*path)[:len(*path)-1]
		if err != nil {
			return nil, err
		}
		xs[i] = x
	}
	return xs, nil
}
