package constraint

import (
	"maps"
	"strings"
	"testing"
)

func TestParamsString(t *testing.T) {
	for _, tc := range []struct {
		p        Params
		str, key string
	}{
		{nil, "{}", ""},
		{Params{}, "{}", ""},
		{Params{"env": "prod"}, "{env=prod}", "env=prod"},
		{Params{"version": "v1", "env": "prod"}, "{env=prod, version=v1}", "env=prod,version=v1"},
		{Params{"a b": "", "": "x", "k": "a,b"}, `{""=x, "a b"="", k="a,b"}`, `""=x,"a b"="",k="a,b"`},
		{Params{"k": "}{="}, `{k="}{="}`, `k="}{="`},
	} {
		if got := tc.p.String(); got != tc.str {
			t.Errorf("String(%#v) = %q, want %q", tc.p, got, tc.str)
		}
		if got := tc.p.Key(); got != tc.key {
			t.Errorf("Key(%#v) = %q, want %q", tc.p, got, tc.key)
		}
		for _, s := range []string{tc.str, tc.key} {
			back, err := ParseParams(s)
			if err != nil || !maps.Equal(back, tc.p) {
				t.Errorf("ParseParams(%q) = %#v, %v; want %#v", s, back, err, tc.p)
			}
		}
	}
	// Keys must tell apart maps that a naive join would confuse.
	if (Params{"a": "1,b=2"}).Key() == (Params{"a": "1", "b": "2"}).Key() {
		t.Error("Key is ambiguous")
	}
}

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Params
	}{
		{"", Params{}},
		{"  ", Params{}},
		{"{}", Params{}},
		{" { } ", Params{}},
		{"env=prod", Params{"env": "prod"}},
		{"env=prod, version=v1", Params{"env": "prod", "version": "v1"}},
		{"{ env = prod ,version=v1 }", Params{"env": "prod", "version": "v1"}},
		{`{path="/a b", "k k"=""}`, Params{"path": "/a b", "k k": ""}},
		{"true=false,exists=1", Params{"true": "false", "exists": "1"}},
	} {
		got, err := ParseParams(tc.in)
		if err != nil {
			t.Errorf("ParseParams(%q): %v", tc.in, err)
			continue
		}
		if got == nil || !maps.Equal(got, tc.want) {
			t.Errorf("ParseParams(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestParseParamsErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{a=1", `params "{a=1": at byte 4: expected "," or "}", found end of input`},
		{"a=1}", `at byte 3: expected "," or end of input, found "}"`},
		{"{a=1}}", `at byte 5: expected end of input, found "}"`},
		{"a=1,", `at byte 4: expected a key, found end of input`},
		{"a", `at byte 1: expected "=" after key, found end of input`},
		{"a=", `at byte 2: expected a value, found end of input`},
		{"a=1 b=2", `at byte 4: expected "," or end of input, found word "b"`},
		{"a=1, a=2", `at byte 5: duplicate key a`},
		{"a=1 && b=2", `at byte 4: expected "," or end of input, found "&&"`},
		{"a=1 # b=2", `at byte 4: unexpected character '#'`},
		{`a="x`, `at byte 2: unterminated quoted string`},
		{"{a=" + strings.Repeat("x", MaxTextLen) + "}", "more than the limit of 65536"},
	} {
		_, err := ParseParams(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseParams(%q) error %v, want …%s", tc.in, err, tc.want)
		}
	}
}
