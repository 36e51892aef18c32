package name

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range tp1Names {
		f.Add(s)
	}
	for _, s := range envoyRoundTrip {
		f.Add(s)
	}
	for _, s := range []string{
		envoyEscapedURL,
		"xdstp:///type/foo%2Fbar/baz",
		"xdstp://foo",
		"xdstp://foo/some-type#bar=baz",
		"xdstp:/x",
		"xdstp://a/T/x?b=2&a=1&a=3&&c",
		"xdstp://a/T/x?a=y&a.b=x",
		"xdstp://a/T//*",
		"xdstp://a/T/%2a",
		"xdstp://a b/T/~x%01?k=%7e v",
		"xdstp://a/T/x#entry=e,alt=xdstp://b/T/y#alt=xdstp://c/T/z",
		"xdstp://a/T/x" + strings.Repeat("#alt=xdstp://a/T/x", maxAltDepth+1),
		"foo",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q) error %T is not *Error", s, err)
			}
			return
		}
		s2 := n.String()
		n2, err := Parse(s2)
		if err != nil {
			t.Fatalf("Parse(%q) ok, but its String() %q fails: %v", s, s2, err)
		}
		if !n2.Equal(n) {
			t.Fatalf("Parse(%q).String() = %q re-parses to a different name", s, s2)
		}
		if s3 := n2.String(); s3 != s2 {
			t.Fatalf("canonical form not a fixed point: %q -> %q -> %q", s, s2, s3)
		}
		if _, err := ParseURN(s); err == nil && n.IsXDSTP() && (n.Glob || n.Alt != nil || n.Entry != "") {
			t.Fatalf("ParseURN(%q) accepted a URL", s)
		}
		if n.IsXDSTP() && !protoAmbiguous(n) {
			back, err := FromLocator(n.Locator())
			if err != nil || !back.Equal(n) {
				t.Fatalf("Locator round trip of %q: %v, %v", s, back, err)
			}
		}
	})
}

// protoAmbiguous reports whether n, or its alt, has an id ending in a "*"
// segment without being a glob (written "%2A"). The proto's unescaped Id
// spells that id as it spells a glob, so Locator cannot round-trip it
// (see Locator).
func protoAmbiguous(n Name) bool {
	if !n.Glob && starLast(n.ID) {
		return true
	}
	return n.Alt != nil && protoAmbiguous(*n.Alt)
}
