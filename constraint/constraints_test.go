package constraint

import (
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

func TestMatch(t *testing.T) {
	p := Params{"env": "prod", "version": "v1", "empty": ""}
	for _, tc := range []struct {
		c    Constraints
		want bool
	}{
		{Constraints{}, true},
		{Value("env", "prod"), true},
		{Value("env", "test"), false},
		{Value("missing", ""), false},
		{Value("empty", ""), true},
		{Exists("env"), true},
		{Exists("empty"), true},
		{Exists("missing"), false},
		{Not(Exists("missing")), true},
		{Not(Value("env", "prod")), false},
		{Not(Value("missing", "x")), true}, // an absent key is != every value
		{And(Value("env", "prod"), Value("version", "v1")), true},
		{And(Value("env", "prod"), Value("version", "v2")), false},
		{Or(Value("env", "test"), Value("version", "v1")), true},
		{Or(Value("env", "test"), Value("version", "v2")), false},
		{And(), true},
		{Or(), false},
		{Not(Or()), true},
		{Not(And()), false},
	} {
		if got := tc.c.Match(p); got != tc.want {
			t.Errorf("%q.Match(%v) = %v, want %v", tc.c, p, got, tc.want)
		}
	}
}

// docs/protocol.md §4.1 leaves empty AND and OR lists unspecified; we pin the
// natural reading: AND of nothing is true (the zero value), OR of nothing is
// false.
func TestEmptyAndOr(t *testing.T) {
	emptyAnd := &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_AndConstraints{
		AndConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{},
	}}
	emptyOr := &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{
		OrConstraints: &discoveryv3.DynamicParameterConstraints_ConstraintList{},
	}}
	nilAnd := &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_AndConstraints{}}
	nilOr := &discoveryv3.DynamicParameterConstraints{Type: &discoveryv3.DynamicParameterConstraints_OrConstraints{}}
	everyone := []Params{nil, {}, {"env": "prod"}}

	for name, m := range map[string]*discoveryv3.DynamicParameterConstraints{"and_constraints:{}": emptyAnd, "and_constraints (nil list)": nilAnd} {
		c, err := FromProto(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !c.IsZero() || c.String() != "" || c.Proto() != nil {
			t.Errorf("%s = %q, want the zero value", name, c)
		}
		for _, p := range everyone {
			if !c.Match(p) {
				t.Errorf("%s does not match %v", name, p)
			}
		}
	}
	for name, m := range map[string]*discoveryv3.DynamicParameterConstraints{"or_constraints:{}": emptyOr, "or_constraints (nil list)": nilOr} {
		c, err := FromProto(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.IsZero() || c.String() != "false" || !c.Equal(Or()) {
			t.Errorf("%s = %q, want false", name, c)
		}
		for _, p := range everyone {
			if c.Match(p) {
				t.Errorf("%s matches %v", name, p)
			}
		}
	}
	if !And().IsZero() || !And().Equal(Constraints{}) {
		t.Error("And() is not the zero value")
	}
	if Or().IsZero() || Or().String() != "false" {
		t.Errorf("Or() = %q, want false", Or())
	}
}

func TestCanonicalForm(t *testing.T) {
	a, b, c := Value("a", "1"), Value("b", "2"), Value("c", "3")
	for _, tc := range []struct {
		name string
		x, y Constraints
		want string
	}{
		{"operand order", And(a, b), And(b, a), "a=1 && b=2"},
		{"text order", MustParse("a=1 && b=2"), MustParse("b=2 && a=1"), "a=1 && b=2"},
		{"or order", Or(b, a), Or(a, b), "a=1 || b=2"},
		{"nested and", And(a, And(b, c)), And(And(c, b), a), "a=1 && b=2 && c=3"},
		{"nested or", Or(Or(a, b), c), Or(c, Or(b, Or(a))), "a=1 || b=2 || c=3"},
		{"duplicates", And(a, b, a, And(b, a)), And(a, b), "a=1 && b=2"},
		{"duplicate or", Or(a, a), a, "a=1"},
		{"double negation", Not(Not(a)), a, "a=1"},
		{"double negation text", MustParse("!!a=1"), MustParse("a=1"), "a=1"},
		{"triple negation", Not(Not(Not(a))), MustParse("a!=1"), "a!=1"},
		{"single operand", And(a), Or(a), "a=1"},
		{"and identity", And(a, Constraints{}), a, "a=1"},
		{"or identity", Or(a, Or()), a, "a=1"},
		{"and absorbing", And(a, Or()), Or(), "false"},
		{"or absorbing", Or(a, Constraints{}), Constraints{}, ""},
		{"not true", Not(Constraints{}), Or(), "false"},
		{"not false", Not(Or()), Constraints{}, ""},
		{"nested after sort", And(Or(b, a), c), And(c, Or(a, b)), "(a=1 || b=2) && c=3"},
		{"not of list", Not(And(b, a)), MustParse("!(a=1 && b=2)"), "!(a=1 && b=2)"},
		{"distinct negations", And(Not(a), Not(b)), MustParse("b!=2 && a!=1"), "a!=1 && b!=2"},
	} {
		if !tc.x.Equal(tc.y) || tc.x.Key() != tc.y.Key() {
			t.Errorf("%s: %q and %q differ", tc.name, tc.x, tc.y)
		}
		if tc.x.String() != tc.want || tc.x.Key() != tc.want {
			t.Errorf("%s: String() = %q, want %q", tc.name, tc.x, tc.want)
		}
		if tc.x.IsZero() != (tc.want == "") {
			t.Errorf("%s: IsZero() = %v", tc.name, tc.x.IsZero())
		}
	}
	if And(a, b).Equal(Or(a, b)) {
		t.Error("AND equal to OR")
	}
	// Equal is syntactic: a tautology is not the zero value.
	if Or(a, Not(a)).Equal(Constraints{}) {
		t.Error("a=1 || a!=1 canonicalized to true")
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"false", nil},
		{"env=prod", []string{"env"}},
		{"version=v1 && env!=prod || exists(zone) && !exists(env)", []string{"env", "version", "zone"}},
		{`"b b"=1 || a=2 || a=3`, []string{"a", "b b"}},
	} {
		if got := MustParse(tc.in).Keys(); !slices.Equal(got, tc.want) {
			t.Errorf("Keys(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEmptyKeyPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"Value":  func() { Value("", "x") },
		"Exists": func() { Exists("") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with an empty key did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	c := MustParse("env!=prod && (version=v1 || exists(zone)) && !(tier=gold && region=eu)")
	p := Params{"env": "test", "version": "v1", "zone": "a", "tier": "gold", "region": "us"}
	if !c.Match(p) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(100, func() { c.Match(p) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}

func TestTextMarshaling(t *testing.T) {
	c := MustParse("b=2 && a=1")
	b, err := c.MarshalText()
	if err != nil || string(b) != "a=1 && b=2" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	var d Constraints
	if err := d.UnmarshalText([]byte("b=2 && a=1")); err != nil || !d.Equal(c) {
		t.Fatalf("UnmarshalText = %q, %v", d, err)
	}
	if err := d.UnmarshalText([]byte("a=")); err == nil {
		t.Fatal("UnmarshalText accepted a syntax error")
	}
}

func TestSelecting(t *testing.T) {
	c := Selecting(Params{"env": "qa", "zone": "z1"}, []string{"env", "version"})
	if got := c.String(); got != "!exists(version) && env=qa" && got != "env=qa && !exists(version)" {
		t.Errorf("Selecting = %s", got)
	}
	for _, tc := range []struct {
		p    Params
		want bool
	}{
		{Params{"env": "qa"}, true},
		{Params{"env": "qa", "zone": "other"}, true}, // keys outside the set do not matter
		{Params{"env": "qa", "version": "v1"}, false},
		{Params{"env": "prod"}, false},
		{nil, false},
	} {
		if got := c.Match(tc.p); got != tc.want {
			t.Errorf("Match(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if !Selecting(Params{"env": "qa"}, nil).IsZero() {
		t.Error("no keys: want unconstrained")
	}
}

func TestValues(t *testing.T) {
	c := MustParse(`env=prod && (version=v2 || version=v1 || version=v2) && exists(region) && !(zone="a b")`)
	got := c.Values()
	want := map[string][]string{"env": {"prod"}, "version": {"v1", "v2"}, "region": nil, "zone": {"a b"}}
	if len(got) != len(want) {
		t.Fatalf("Values() = %v, want %v", got, want)
	}
	for k, vs := range want {
		if g, ok := got[k]; !ok || !slices.Equal(g, vs) {
			t.Errorf("Values()[%s] = %v, want %v", k, g, vs)
		}
	}
	if len((Constraints{}).Values()) != 0 {
		t.Error("the zero value mentions no keys")
	}
}
