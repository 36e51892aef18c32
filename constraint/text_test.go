package constraint

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{" \t\r\n", ""},
		{"true", ""},
		{"false", "false"},
		{"!true", "false"},
		{"!false", ""},
		{"(true)", ""},
		{"a=1", "a=1"},
		{" a = 1 ", "a=1"},
		{"\ta=1\n&&\rb=2 ", "a=1 && b=2"},
		{"b=2 && a=1", "a=1 && b=2"},
		{"a=1&&b=2||c=3", "a=1 && b=2 || c=3"},
		{"!(a=1)", "a!=1"},
		{"!a=1", "a!=1"},
		{"!!a=1", "a=1"},
		{"!!!a=1", "a!=1"},
		{"a!=1", "a!=1"},
		{"!a!=1", "a=1"},
		{"exists(a)", "exists(a)"},
		{"exists ( a )", "exists(a)"},
		{"!exists(a)", "!exists(a)"},
		{"!(a=1 && b=2)", "!(a=1 && b=2)"},
		{"!(b=2 || a=1)", "!(a=1 || b=2)"},
		{"(((a=1)))", "a=1"},
		{"a=1 && (b=2 && c=3)", "a=1 && b=2 && c=3"},
		{"(a=1 || b=2) || c=3", "a=1 || b=2 || c=3"},
		{"c=3 && (b=2 || a=1)", "(a=1 || b=2) && c=3"},
		{"a=1 && a=1", "a=1"},
		{"a=1 || a=1 && a=1", "a=1"},
		{"a=1 && true", "a=1"},
		{"a=1 || true", ""},
		{"a=1 && false", "false"},
		{"a=1 || false", "a=1"},
		{"x=1 && (y=1 || z=1) && !(w=1 || v=1)", "!(v=1 || w=1) && x=1 && (y=1 || z=1)"},
		{"!(a=1 && (b=2 || !exists(c)))", "!((!exists(c) || b=2) && a=1)"},
		// Quoting.
		{`k=""`, `k=""`},
		{`k = "v"`, "k=v"},
		{`"k"=v`, "k=v"},
		{`path="/a b"`, `path="/a b"`},
		{`"weird key"=x`, `"weird key"=x`},
		{`a="\x41\u00e9"`, `a="Aé"`},
		{`a="tab\there"`, `a="tab\there"`},
		{`a="\xff"`, `a="\xff"`},
		{`a="quote\"d"`, `a="quote\"d"`},
		{`exists("a b")`, `exists("a b")`},
		{`v.1_x-Y=0.2-rc_1`, `v.1_x-Y=0.2-rc_1`},
		// Keywords are keys or values where a key or value is expected.
		{"true=1", "true=1"},
		{"false!=0", "false!=0"},
		{"exists=1", "exists=1"},
		{"a=true", "a=true"},
		{"a=exists", "a=exists"},
		{"exists(true)", "exists(true)"},
		{"exists(exists)", "exists(exists)"},
		{"!true=1", "true!=1"},
		{`"true"=1`, "true=1"},
	} {
		c, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if got := c.String(); got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
		c2, err := Parse(c.String())
		if err != nil || !c2.Equal(c) || c2.String() != c.String() {
			t.Errorf("re-parsing %q gave %q, %v", c, c2, err)
		}
	}
}

// Precedence is checked by meaning, not only by the printed form.
func TestParsePrecedence(t *testing.T) {
	a, b, c := Value("a", "1"), Value("b", "2"), Value("c", "3")
	for _, tc := range []struct {
		in   string
		want Constraints
	}{
		{"a=1 || b=2 && c=3", Or(a, And(b, c))},
		{"a=1 && b=2 || c=3", Or(And(a, b), c)},
		{"(a=1 || b=2) && c=3", And(Or(a, b), c)},
		{"!a=1 && b=2", And(Not(a), b)},
		{"!(a=1 && b=2)", Not(And(a, b))},
		{"!a=1 || b=2", Or(Not(a), b)},
		{"a=1 || b=2 || c=3", Or(Or(a, b), c)},
		{"!exists(a) && b=2", And(Not(Exists("a")), b)},
	} {
		got, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if !got.Equal(tc.want) {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Pin the meaning on a parameter set where the two readings differ.
	p := Params{"a": "1", "b": "0"}
	if !MustParse("a=1 || b=2 && c=3").Match(p) {
		t.Error(`"a=1 || b=2 && c=3" read as "(a=1 || b=2) && c=3"`)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"env=prod &&", `constraints "env=prod &&": at byte 11: expected a constraint, found end of input`},
		{"env", `at byte 3: expected "=" or "!=" after key env, found end of input`},
		{"env=", `at byte 4: expected a value, found end of input`},
		{"=x", `at byte 0: expected a constraint, found "="`},
		{"a==b", `at byte 2: expected a value, found "="`},
		{"a!", `at byte 1: expected "=" or "!=" after key a, found "!"`},
		{`"a"`, `at byte 3: expected "=" or "!=" after key a, found end of input`},
		{"a=1 b=2", `at byte 4: expected "&&", "||" or end of input, found word "b"`},
		{`a=1 "b"=2`, `at byte 4: expected "&&", "||" or end of input, found quoted string "b"`},
		{"a=1,b=2", `at byte 3: expected "&&", "||" or end of input, found ","`},
		{"a=1)", `at byte 3: expected "&&", "||" or end of input, found ")"`},
		{"(a=1", `at byte 4: expected "&&", "||" or ")", found end of input`},
		{"()", `at byte 1: expected a constraint, found ")"`},
		{"!", `at byte 1: expected a constraint, found end of input`},
		{"a=1 || && b=2", `at byte 7: expected a constraint, found "&&"`},
		{"true false", `at byte 5: expected "&&", "||" or end of input, found word "false"`},
		{"a=1 & b=2", `at byte 4: unexpected character '&' (did you mean "&&"?)`},
		{"a=1 | b=2", `at byte 4: unexpected character '|' (did you mean "||"?)`},
		{"a=1 # note", `at byte 4: unexpected character '#'`},
		{"a=é", `at byte 2: unexpected character 'é'`},
		{"a=\xff", `at byte 2: unexpected byte 0xff`},
		{"foo(x)", `at byte 0: unknown function "foo" (the only function is exists)`},
		{"true(x)", `at byte 0: unknown function "true" (the only function is exists)`},
		{"exists()", `at byte 7: expected a key, found ")"`},
		{"exists(a", `at byte 8: expected ")", found end of input`},
		{"exists(a b)", `at byte 9: expected ")", found word "b"`},
		{"exists(a)=1", `at byte 9: expected "&&", "||" or end of input, found "="`},
		{`a="unterminated`, `at byte 2: unterminated quoted string`},
		{`a="x\`, `at byte 2: unterminated quoted string`},
		{`a="\q"`, `at byte 2: invalid quoted string "\q"`},
		{"a=\"x\ny\"", `at byte 4: newline in quoted string`},
		{`""=x`, `at byte 0: empty key`},
		{`exists("")`, `at byte 7: empty key`},
		{strings.Repeat("!", 65) + "a=1", `at byte 64: nesting deeper than 64 levels`},
		{strings.Repeat("(", 65) + "a=1" + strings.Repeat(")", 65), `at byte 64: nesting deeper than 64 levels`},
		{strings.Repeat("!(", 33) + "a=1" + strings.Repeat(")", 33), `at byte 64: nesting deeper than 64 levels`},
	} {
		_, err := Parse(tc.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error %q", tc.in, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error\n  got  %s\n  want …%s", tc.in, err, tc.want)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Input != tc.in || se.What != "constraints" {
			t.Errorf("Parse(%q) error %#v is not a matching *SyntaxError", tc.in, err)
		}
	}
}

func TestParseLimits(t *testing.T) {
	// Exactly at the nesting limit is fine.
	in := strings.Repeat("!", 64) + "a=1"
	if c, err := Parse(in); err != nil || c.String() != "a=1" {
		t.Errorf("64 negations: %q, %v", c, err)
	}
	in = strings.Repeat("(", 64) + "a=1" + strings.Repeat(")", 64)
	if _, err := Parse(in); err != nil {
		t.Errorf("64 parentheses: %v", err)
	}

	// Input length.
	long := "a=" + strings.Repeat("x", MaxTextLen)
	_, err := Parse(long)
	if err == nil || !strings.Contains(err.Error(), "input is 65538 bytes, more than the limit of 65536") {
		t.Errorf("long input: %v", err)
	}
	if len(err.Error()) > 200 {
		t.Errorf("error message for a long input is %d bytes", len(err.Error()))
	}
	ok := "a=" + strings.Repeat("x", MaxTextLen-2)
	if _, err := Parse(ok); err != nil {
		t.Errorf("input of exactly MaxTextLen: %v", err)
	}

	// An OR under an AND needs parentheses but an AND under an OR does
	// not, so each parenthesis here nests two proto levels; the parse
	// succeeds syntactically but the result is too deep for the proto
	// limit, so it is refused.
	const levels = 40
	deep := strings.Repeat("a=1 || b=1 && (", levels) + "c=1" + strings.Repeat(")", levels)
	_, err = Parse(deep)
	if err == nil || !strings.Contains(err.Error(), ": expression nests deeper than 64 levels") {
		t.Errorf("deep alternation: %v", err)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse did not panic")
		}
	}()
	MustParse("a=")
}
