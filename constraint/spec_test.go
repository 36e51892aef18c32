package constraint

import (
	"errors"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/prototext"
)

// The vectors in this file are the examples of
// xRFC TP2 (github.com/cncf/xds proposals/TP2-dynamically-generated-cacheable-xds-resources.md), written as
// valid prototext (the spec abbreviates ConstraintList as a bare list).

func fromText(t *testing.T, txt string) Constraints {
	t.Helper()
	m := &discoveryv3.DynamicParameterConstraints{}
	if err := prototext.Unmarshal([]byte(txt), m); err != nil {
		t.Fatalf("prototext %q: %v", txt, err)
	}
	c, err := FromProto(m)
	if err != nil {
		t.Fatalf("FromProto(%s): %v", txt, err)
	}
	return c
}

// selected returns the IDs of every variant that matches p.
func selected(vs []Variant, p Params) []string {
	var ids []string
	for _, v := range vs {
		if v.Constraints.Match(p) {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// TP2 "Example": one route selected by env=prod, another by version=v1, so
// four variants serve all nine env × version combinations.
func TestTP2FourVariants(t *testing.T) {
	spec := []struct{ id, proto, text string }{
		{"neither", `and_constraints:{constraints:[
			{not_constraints:{constraint:{key:"env" value:"prod"}}},
			{not_constraints:{constraint:{key:"version" value:"v1"}}}]}`,
			"env!=prod && version!=v1"},
		{"prod", `and_constraints:{constraints:[
			{constraint:{key:"env" value:"prod"}},
			{not_constraints:{constraint:{key:"version" value:"v1"}}}]}`,
			"env=prod && version!=v1"},
		{"v1", `and_constraints:{constraints:[
			{not_constraints:{constraint:{key:"env" value:"prod"}}},
			{constraint:{key:"version" value:"v1"}}]}`,
			"env!=prod && version=v1"},
		{"prod+v1", `and_constraints:{constraints:[
			{constraint:{key:"env" value:"prod"}},
			{constraint:{key:"version" value:"v1"}}]}`,
			"env=prod && version=v1"},
	}
	var vs []Variant
	for _, s := range spec {
		fp := fromText(t, s.proto)
		ft := MustParse(s.text)
		if !fp.Equal(ft) {
			t.Errorf("%s: proto form %q != text form %q", s.id, fp, ft)
		}
		if got := fp.String(); got != s.text {
			t.Errorf("%s: String() = %q, want %q", s.id, got, s.text)
		}
		vs = append(vs, Variant{ID: s.id, Constraints: fp})
	}
	if err := ValidateVariants(vs); err != nil {
		t.Fatalf("ValidateVariants: %v", err)
	}

	for _, tc := range []struct {
		params Params
		want   string
	}{
		{Params{"env": "prod", "version": "v1"}, "prod+v1"},
		{Params{"env": "prod", "version": "v2"}, "prod"},
		{Params{"env": "prod", "version": "v3"}, "prod"},
		{Params{"env": "canary", "version": "v1"}, "v1"},
		{Params{"env": "canary", "version": "v2"}, "neither"},
		{Params{"env": "canary", "version": "v3"}, "neither"},
		{Params{"env": "test", "version": "v1"}, "v1"},
		{Params{"env": "test", "version": "v2"}, "neither"},
		{Params{"env": "test", "version": "v3"}, "neither"},
		{Params{}, "neither"},
		{nil, "neither"},
		{Params{"env": "prod"}, "prod"},
		{Params{"env": "canary"}, "neither"},
		{Params{"env": "test"}, "neither"},
		{Params{"version": "v1"}, "v1"},
		{Params{"version": "v2"}, "neither"},
		{Params{"version": "v3"}, "neither"},
		{Params{"env": "prod", "version": "v1", "region": "eu"}, "prod+v1"},
	} {
		got := selected(vs, tc.params)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%v selects %v, want exactly [%s]", tc.params, got, tc.want)
		}
	}
}

// TP2 "Example: Basic Dynamic Parameters Usage".
func TestTP2Basic(t *testing.T) {
	vs := []Variant{
		{"prod", fromText(t, `constraint:{key:"env" value:"prod"}`)},
		{"test", fromText(t, `constraint:{key:"env" value:"test"}`)},
	}
	if err := ValidateVariants(vs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params Params
		want   []string
	}{
		{Params{"env": "prod"}, []string{"prod"}},
		{Params{"env": "test"}, []string{"test"}},
		{Params{"env": "qa"}, nil},
		{Params{}, nil},
	} {
		if got := selected(vs, tc.params); !slices.Equal(got, tc.want) {
			t.Errorf("%v selects %v, want %v", tc.params, got, tc.want)
		}
	}
}

// TP2 "Unconstrained Parameters": keys the constraints do not mention never
// block a match, and a variant without constraints matches everyone.
func TestTP2Unconstrained(t *testing.T) {
	prod := MustParse("env=prod")
	for _, p := range []Params{{"env": "prod", "version": "v1"}, {"env": "prod", "version": "v2"}} {
		if !prod.Match(p) {
			t.Errorf("env=prod does not match %v", p)
		}
	}
	var any Constraints
	for _, p := range []Params{nil, {}, {"env": "prod"}, {"env": "test", "version": "v2"}} {
		if !any.Match(p) {
			t.Errorf("unconstrained does not match %v", p)
		}
	}
	if err := ValidateVariants([]Variant{{"only", any}}); err != nil {
		t.Errorf("single unconstrained variant: %v", err)
	}
}

// TP2 "Example: Transition Scenarios" and "Adding a New Key on the Server
// First".
func TestTP2Transition(t *testing.T) {
	t.Run("replace env=prod by two version variants", func(t *testing.T) {
		vs := []Variant{
			{"prod-v1", fromText(t, `and_constraints:{constraints:[
				{constraint:{key:"env" value:"prod"}},
				{constraint:{key:"version" value:"v1"}}]}`)},
			{"prod-v2", fromText(t, `and_constraints:{constraints:[
				{constraint:{key:"env" value:"prod"}},
				{constraint:{key:"version" value:"v2"}}]}`)},
		}
		if err := ValidateVariants(vs); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]string{
			"env=prod, version=v1": "prod-v1",
			"env=prod, version=v2": "prod-v2",
		} {
			if got := selected(vs, mustParams(t, p)); !slices.Equal(got, []string{want}) {
				t.Errorf("{%s} selects %v, want [%s]", p, got, want)
			}
		}
	})

	t.Run("new key on the server first is rejected", func(t *testing.T) {
		vs := []Variant{
			{"old", fromText(t, `constraint:{key:"env" value:"prod"}`)},
			{"new", fromText(t, `and_constraints:{constraints:[
				{constraint:{key:"env" value:"prod"}},
				{constraint:{key:"version" value:"v1"}}]}`)},
		}
		err := ValidateVariants(vs)
		var kse *KeySetError
		if !errors.As(err, &kse) {
			t.Fatalf("ValidateVariants = %v, want a *KeySetError", err)
		}
		if kse.A != "old" || kse.B != "new" || !slices.Equal(kse.AKeys, []string{"env"}) || !slices.Equal(kse.BKeys, []string{"env", "version"}) {
			t.Errorf("KeySetError = %+v", kse)
		}
		// The ambiguity the spec describes is reported too.
		var oe *OverlapError
		if !errors.As(err, &oe) || oe.Witness.String() != "{env=prod, version=v1}" {
			t.Errorf("want an overlap on {env=prod, version=v1}, got %v", err)
		}
	})

	t.Run("exists gives old clients an explicit default", func(t *testing.T) {
		// The spec's text spells the field not_constraint; the proto's is
		// not_constraints.
		vs := []Variant{
			{"old", fromText(t, `and_constraints:{constraints:[
				{constraint:{key:"env" value:"prod"}},
				{not_constraints:{constraint:{key:"version" exists:{}}}}]}`)},
			{"new", fromText(t, `and_constraints:{constraints:[
				{constraint:{key:"env" value:"prod"}},
				{constraint:{key:"version" value:"v1"}}]}`)},
		}
		if !vs[0].Constraints.Equal(MustParse("env=prod && !exists(version)")) {
			t.Errorf("old variant is %q", vs[0].Constraints)
		}
		if err := ValidateVariants(vs); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string][]string{
			"env=prod":             {"old"},
			"env=prod, version=v1": {"new"},
			"env=prod, version=v2": nil,
		} {
			if got := selected(vs, mustParams(t, p)); !slices.Equal(got, want) {
				t.Errorf("{%s} selects %v, want %v", p, got, want)
			}
		}
	})
}

// TP2 "Variants With Overlapping Constraint Values".
func TestTP2OverlappingValues(t *testing.T) {
	vs := []Variant{
		{"prod-or-test", fromText(t, `or_constraints:{constraints:[
			{constraint:{key:"env" value:"prod"}},
			{constraint:{key:"env" value:"test"}}]}`)},
		{"qa-or-test", fromText(t, `or_constraints:{constraints:[
			{constraint:{key:"env" value:"qa"}},
			{constraint:{key:"env" value:"test"}}]}`)},
	}
	err := ValidateVariants(vs)
	var oe *OverlapError
	if !errors.As(err, &oe) {
		t.Fatalf("ValidateVariants = %v, want an *OverlapError", err)
	}
	if oe.A != "prod-or-test" || oe.B != "qa-or-test" || oe.Witness.String() != "{env=test}" {
		t.Errorf("OverlapError = %+v", oe)
	}
	if want := "variants prod-or-test and qa-or-test overlap: both match {env=test}"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	var kse *KeySetError
	if errors.As(err, &kse) {
		t.Errorf("unexpected key-set error: %v", kse)
	}
}

func mustParams(t *testing.T, s string) Params {
	t.Helper()
	p, err := ParseParams(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
