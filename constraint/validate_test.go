package constraint

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
)

func variants(texts ...string) []Variant {
	vs := make([]Variant, len(texts))
	for i, s := range texts {
		vs[i] = Variant{ID: fmt.Sprintf("v%d", i), Constraints: MustParse(s)}
	}
	return vs
}

func TestValidateVariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string // "" for valid; else the whole joined message
	}{
		{"none", nil, ""},
		{"one", []string{"env=prod"}, ""},
		{"one unconstrained", []string{""}, ""},
		{"one unsatisfiable", []string{"a=1 && a=2"}, ""},
		{"disjoint values", []string{"env=prod", "env=test", "env=qa"}, ""},
		{"exists split", []string{"exists(env)", "!exists(env)"}, ""},
		{"complement", []string{"env=prod", "env!=prod"}, ""},
		{"unsatisfiable variants never overlap", []string{"a=1 && a=2", "a=1 && a!=1", "a=1"}, ""},
		{"two false", []string{"false", "false"}, ""},
		{"two unconstrained", []string{"", ""}, "variants v0 and v1 overlap: both match {}"},
		{"identical", []string{"env=prod", "env=prod"}, "variants v0 and v1 overlap: both match {env=prod}"},
		{"absent matches both negations", []string{"env!=prod", "env!=test"}, "variants v0 and v1 overlap: both match {}"},
		{"other value", []string{"env!=prod && exists(env)", "env!=test && exists(env)"}, "variants v0 and v1 overlap: both match {env=other}"},
		{"other avoids literals", []string{`a!="other" && exists(a)`, "a!=other1 && exists(a)"}, "variants v0 and v1 overlap: both match {a=other2}"},
		{"independent keys", []string{"a=1 && b!=2", "b!=3 && a=1"}, "variants v0 and v1 overlap: both match {a=1}"},
		{"key sets and overlaps, in order", []string{"env=prod", "env=prod && version=v1", "env=test", "env=test || version=v2"},
			"variant v0 constrains [env] but variant v1 constrains [env, version] (every variant of a resource must constrain the same keys)\n" +
				"variant v0 constrains [env] but variant v3 constrains [env, version] (every variant of a resource must constrain the same keys)\n" +
				"variants v0 and v1 overlap: both match {env=prod, version=v1}\n" +
				"variants v0 and v3 overlap: both match {env=prod, version=v2}\n" +
				"variants v2 and v3 overlap: both match {env=test}"},
	} {
		err := ValidateVariants(variants(tc.in...))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: ValidateVariants(%q)\n  got  %q\n  want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestValidateVariantsErrorsAs(t *testing.T) {
	err := ValidateVariants(variants("a=1", "a=1 && b=1", "a=2"))
	var kse *KeySetError
	var oe *OverlapError
	if !errors.As(err, &kse) || !errors.As(err, &oe) {
		t.Fatalf("errors.As failed on %v", err)
	}
	if kse.A != "v0" || kse.B != "v1" || oe.A != "v0" || oe.B != "v1" {
		t.Errorf("got %+v and %+v", kse, oe)
	}
	if !MustParse("a=1").Match(oe.Witness) || !MustParse("a=1 && b=1").Match(oe.Witness) {
		t.Errorf("witness %v does not match both", oe.Witness)
	}
}

// Overlap must stay exact and fast when many keys and literals are involved;
// the search prunes on three-valued partial evaluation and never branches on
// keys that cannot change the outcome.
func TestOverlapManyKeys(t *testing.T) {
	const nk, nv = 6, 10
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	val := func(j int) string { return fmt.Sprintf("v%d", j) }
	in := func(i int, vals ...int) string {
		var s []string
		for _, j := range vals {
			s = append(s, key(i)+"="+val(j))
		}
		return "(" + strings.Join(s, " || ") + ")"
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	// Product form: every key in a set, the last key's sets disjoint.
	var pa, pb []string
	for i := range nk {
		if i == nk-1 {
			pa, pb = append(pa, in(i, all[:5]...)), append(pb, in(i, all[5:]...))
		} else {
			pa, pb = append(pa, in(i, all...)), append(pb, in(i, all...))
		}
	}
	// One connected group: "all keys equal v_j for some j", against its
	// negation and against a permuted copy of itself.
	diag := func(perm func(int) int) string {
		var d []string
		for j := range nv {
			var c []string
			for i := range nk {
				c = append(c, key(i)+"="+val(perm(j)))
			}
			d = append(d, "("+strings.Join(c, " && ")+")")
		}
		return strings.Join(d, " || ")
	}
	id := func(j int) int { return j }
	rev := func(j int) int { return nv - 1 - j }
	shift := func(i int) string { // k_i = v_(i+j) for some j: disjoint from diag
		var d []string
		for j := range nv {
			var c []string
			for i := range nk {
				c = append(c, key(i)+"="+val((i+j)%nv))
			}
			d = append(d, "("+strings.Join(c, " && ")+")")
		}
		return strings.Join(d, " || ")
	}
	for _, tc := range []struct {
		name    string
		a, b    string
		witness string // "" for no overlap
	}{
		{"product, disjoint", strings.Join(pa, " && "), strings.Join(pb, " && "), ""},
		{"product, overlapping", strings.Join(pa, " && "), strings.Join(pa, " && "), "{k0=v0, k1=v0, k2=v0, k3=v0, k4=v0, k5=v0}"},
		{"diagonal vs negation", diag(id), "!(" + diag(id) + ")", ""},
		{"diagonal vs reversed", diag(id), diag(rev), "{k0=v0, k1=v0, k2=v0, k3=v0, k4=v0, k5=v0}"},
		{"diagonal vs shifted", diag(id), shift(0), ""},
		{"negated products", "!(" + strings.Join(pa, " && ") + ")", "!(" + strings.Join(pb, " && ") + ")", "{k0=v0, k1=v0, k2=v0, k3=v0, k4=v0}"},
	} {
		a, b := MustParse(tc.a), MustParse(tc.b)
		w, ok, err := Overlap(a, b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ""
		if ok {
			got = w.String()
			if !a.Match(w) || !b.Match(w) {
				t.Errorf("%s: witness %v does not match both", tc.name, w)
			}
		}
		if got != tc.witness {
			t.Errorf("%s: Overlap = %q, want %q", tc.name, got, tc.witness)
		}
	}
}

// An adversarial variant set gets ErrTooComplex instead of an unbounded
// search: here the budget is lowered below what the diagonal needs.
func TestOverlapBudget(t *testing.T) {
	defer func(n int) { searchSteps = n }(searchSteps)
	searchSteps = 3
	a := MustParse("(a=1 && b=1) || (a=2 && b=2) || (a=3 && b=3)")
	b := MustParse("(a=1 && b=2) || (a=2 && b=3) || (a=3 && b=1)")
	if _, _, err := Overlap(a, b); !errors.Is(err, ErrTooComplex) {
		t.Fatalf("Overlap over budget: %v", err)
	}
	err := ValidateVariants([]Variant{{ID: "A", Constraints: a}, {ID: "B", Constraints: b}})
	if !errors.Is(err, ErrTooComplex) || !strings.Contains(err.Error(), "variants A and B") {
		t.Fatalf("ValidateVariants over budget: %v", err)
	}
}

// Property: Overlap agrees with brute force over a small value domain that
// covers every distinguishable case (the literals 1-3, another value, and
// absence), and its witness always matches both sides.
func TestOverlapBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c"}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		x := randomExpr(r, keys, 3)
		y := randomExpr(r, keys, 3)
		checkOverlap(t, x, y, keys)
	}
}

func randomExpr(r *rand.Rand, keys []string, depth int) Constraints {
	k := keys[r.IntN(len(keys))]
	switch n := r.IntN(10); {
	case depth == 0 || n < 3:
		return Value(k, fmt.Sprint(1+r.IntN(3)))
	case n < 4:
		return Exists(k)
	case n < 5:
		return Not(randomExpr(r, keys, depth-1))
	default:
		cs := make([]Constraints, r.IntN(4))
		for i := range cs {
			cs[i] = randomExpr(r, keys, depth-1)
		}
		if n < 8 {
			return And(cs...)
		}
		return Or(cs...)
	}
}

// checkOverlap compares Overlap and ValidateVariants with enumeration of
// every assignment of {absent, 1, 2, 3, 4} to keys.
func checkOverlap(t *testing.T, x, y Constraints, keys []string) {
	t.Helper()
	want := false
	var brute Params
	var rec func(i int, p Params)
	rec = func(i int, p Params) {
		if want {
			return
		}
		if i == len(keys) {
			if x.Match(p) && y.Match(p) {
				want, brute = true, maps.Clone(p)
			}
			return
		}
		rec(i+1, p)
		for _, v := range []string{"1", "2", "3", "4"} {
			p[keys[i]] = v
			rec(i+1, p)
			delete(p, keys[i])
		}
	}
	rec(0, Params{})

	w, got, err := Overlap(x, y)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Overlap(%q, %q) = %v, brute force says %v (witness %v)", x, y, got, want, brute)
	}
	if got && (!x.Match(w) || !y.Match(w)) {
		t.Fatalf("Overlap(%q, %q) witness %v does not match both", x, y, w)
	}
	err = ValidateVariants([]Variant{{"x", x}, {"y", y}})
	var oe *OverlapError
	if errors.As(err, &oe) != want {
		t.Fatalf("ValidateVariants(%q, %q) = %v, brute force overlap %v", x, y, err, want)
	}
	if want && oe.Witness.String() != w.String() {
		t.Fatalf("ValidateVariants witness %v != Overlap witness %v", oe.Witness, w)
	}
}
