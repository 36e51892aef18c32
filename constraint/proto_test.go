package constraint

import (
	"errors"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

func TestProtoForm(t *testing.T) {
	for _, tc := range []struct{ text, proto string }{
		{"env=prod", `constraint:{key:"env" value:"prod"}`},
		{`k=""`, `constraint:{key:"k" value:""}`},
		{"exists(version)", `constraint:{key:"version" exists:{}}`},
		{"false", `or_constraints:{}`},
		{"env!=prod", `not_constraints:{constraint:{key:"env" value:"prod"}}`},
		{"version=v1 && env=prod", `and_constraints:{constraints:[
			{constraint:{key:"env" value:"prod"}},
			{constraint:{key:"version" value:"v1"}}]}`},
		{"env=test || env=prod", `or_constraints:{constraints:[
			{constraint:{key:"env" value:"prod"}},
			{constraint:{key:"env" value:"test"}}]}`},
		{"!(a=1 || !exists(b))", `not_constraints:{or_constraints:{constraints:[
			{not_constraints:{constraint:{key:"b" exists:{}}}},
			{constraint:{key:"a" value:"1"}}]}}`},
	} {
		want := &discoveryv3.DynamicParameterConstraints{}
		if err := prototext.Unmarshal([]byte(tc.proto), want); err != nil {
			t.Fatal(err)
		}
		got := MustParse(tc.text).Proto()
		if !proto.Equal(got, want) {
			t.Errorf("Proto(%q) = %v, want %v", tc.text, got, want)
		}
	}
	if (Constraints{}).Proto() != nil {
		t.Error("Proto() of the zero value is not nil")
	}
	if c, err := FromProto(nil); err != nil || !c.IsZero() {
		t.Errorf("FromProto(nil) = %q, %v", c, err)
	}
}

func TestProtoRoundTrip(t *testing.T) {
	for _, in := range []string{
		"", "false", "a=1", `"a b"="\x00"`, "exists(a)", "!exists(a)", "a!=1",
		"a=1 && b=2", "a=1 || b=2 && c=3", "!(a=1 && (b=2 || !exists(c)))",
		"env!=prod && version!=v1", "(a=1 || b=1) && (c=1 || d=1) && e!=1",
		strings.Repeat("!(a=1 && ", 31) + "b=1" + strings.Repeat(")", 31),
	} {
		c := MustParse(in)
		m := c.Proto()
		// Through the wire, as a peer would send it.
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%q): %v", in, err)
		}
		m2 := &discoveryv3.DynamicParameterConstraints{}
		if err := proto.Unmarshal(b, m2); err != nil {
			t.Fatal(err)
		}
		if c.IsZero() {
			m2 = nil
		}
		back, err := FromProto(m2)
		if err != nil {
			t.Errorf("FromProto(Proto(%q)): %v", in, err)
			continue
		}
		if !back.Equal(c) {
			t.Errorf("proto round trip of %q gave %q", c, back)
		}
	}
}

// FromProto canonicalizes, so non-canonical wire forms are accepted.
func TestFromProtoCanonicalizes(t *testing.T) {
	for _, tc := range []struct{ proto, want string }{
		{`not_constraints:{not_constraints:{constraint:{key:"a" value:"1"}}}`, "a=1"},
		{`and_constraints:{constraints:[{constraint:{key:"b" value:"2"}}, {and_constraints:{constraints:[{constraint:{key:"a" value:"1"}}, {constraint:{key:"b" value:"2"}}]}}]}`, "a=1 && b=2"},
		{`or_constraints:{constraints:[{constraint:{key:"a" value:"1"}}]}`, "a=1"},
		{`or_constraints:{constraints:[{constraint:{key:"a" value:"1"}}, {and_constraints:{}}]}`, ""},
		{`and_constraints:{constraints:[{constraint:{key:"a" value:"1"}}, {or_constraints:{}}]}`, "false"},
		{`not_constraints:{and_constraints:{}}`, "false"},
		{`not_constraints:{or_constraints:{}}`, ""},
	} {
		if got := fromText(t, tc.proto).String(); got != tc.want {
			t.Errorf("FromProto(%s) = %q, want %q", tc.proto, got, tc.want)
		}
	}
}

func TestFromProtoErrors(t *testing.T) {
	type dpc = discoveryv3.DynamicParameterConstraints
	deep := func(n int) *dpc {
		m := &dpc{Type: &discoveryv3.DynamicParameterConstraints_Constraint{Constraint: &discoveryv3.DynamicParameterConstraints_SingleConstraint{
			Key: "a", ConstraintType: &discoveryv3.DynamicParameterConstraints_SingleConstraint_Value{Value: "1"},
		}}}
		for range n - 1 {
			m = &dpc{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{NotConstraints: m}}
		}
		return m
	}
	if c, err := FromProto(deep(MaxDepth)); err != nil || c.String() != "a!=1" { // 63 negations
		t.Errorf("depth %d: %q, %v", MaxDepth, c, err)
	}
	for _, tc := range []struct {
		name string
		m    *dpc
		path string
		want string
	}{
		{"unset oneof", &dpc{}, "", "dynamic parameter constraints: constraint type is unset"},
		{"unset inside and", mustText(t, `and_constraints:{constraints:[
				{constraint:{key:"a" value:"1"}},
				{constraint:{key:"b" value:"2"}},
				{not_constraints:{}}]}`),
			"and_constraints.constraints[2].not_constraints",
			"dynamic parameter constraints: at and_constraints.constraints[2].not_constraints: constraint type is unset"},
		{"nil list element", &dpc{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{
			OrConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{Constraints: []*dpc{nil}},
		}}, "or_constraints.constraints[0]", "constraint type is unset"},
		{"nil not", &dpc{Type: &discoveryv3.DynamicParameterConstraints_NotConstraints{}}, "not_constraints", "constraint type is unset"},
		{"neither value nor exists", mustText(t, `or_constraints:{constraints:[{constraint:{key:"env"}}]}`),
			"or_constraints.constraints[0].constraint", `neither value nor exists is set for key "env"`},
		{"empty key", mustText(t, `constraint:{value:"x"}`), "constraint", "key is empty"},
		{"empty key with exists", mustText(t, `not_constraints:{constraint:{exists:{}}}`), "not_constraints.constraint", "key is empty"},
		{"nil single constraint", &dpc{Type: &discoveryv3.DynamicParameterConstraints_Constraint{}}, "constraint", "key is empty"},
		{"too deep", deep(MaxDepth + 1), strings.TrimSuffix(strings.Repeat("not_constraints.", MaxDepth), "."), "nesting deeper than 64 levels"},
		{"hostile depth", deep(100000), strings.TrimSuffix(strings.Repeat("not_constraints.", MaxDepth), "."), "nesting deeper than 64 levels"},
	} {
		_, err := FromProto(tc.m)
		var pe *ProtoError
		if !errors.As(err, &pe) {
			t.Errorf("%s: FromProto error = %v, want a *ProtoError", tc.name, err)
			continue
		}
		if pe.Path != tc.path || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: FromProto error = %q (path %q), want path %q and …%s", tc.name, err, pe.Path, tc.path, tc.want)
		}
	}
}

func mustText(t *testing.T, txt string) *discoveryv3.DynamicParameterConstraints {
	t.Helper()
	m := &discoveryv3.DynamicParameterConstraints{}
	if err := prototext.Unmarshal([]byte(txt), m); err != nil {
		t.Fatalf("prototext %q: %v", txt, err)
	}
	return m
}
