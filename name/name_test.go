package name

import (
	"errors"
	"slices"
	"strings"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"google.golang.org/protobuf/proto"
)

// tp1Names is every xdstp:// name in xRFC TP1 (github.com/cncf/xds proposals/TP1-xds-transport-next.md), each
// exactly as it appears there (including the trailing "." and trailing
// space typos in the prose, which are still valid names).
var tp1Names = []string{
	"xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound",
	"xdstp://some-authority/some.type/foo?bar=baz",
	"xdstp://some-authority/some.type/foo?bar=baz&xds.resource.vip=96.54.3.1",
	"xdstp://some-authority/envoy.config.listener.v3.ListenerCollection/foo.",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/bar",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/baz",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/bar ",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/baz.",
	"xdstp://some-authority/envoy.config.listener.v3.ListenerCollection/foo?some=thing",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/foo/*",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/foo/bar",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/foo/baz",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/some/longer/path/*",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/foo/*?some=thing",
	"xdstp://some-authority/envoy.config.listener.v3.Listener/foo/bar?some=thing",
	"xdstp://some-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo",
	"xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/bar",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/baz",
	"xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo#entry=bar",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/foo?node_type=ingress",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/bar?node_type=ingress",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/bar",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/baz.",
	"xdstp://some-cloud-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo#alt=xdstp://some-onprem-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/bar",
	"xdstp://some-cloud-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo",
	"xdstp://some-onprem-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/bar",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/a-listeners/*",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/b-listeners/*",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/a-listeners/foo",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/a-listeners/bar",
	"xdstp://some-authority/envoy.config.listeners.v3.Listener/b-listeners/baz",
}

// envoyRoundTrip is the exact-round-trip vectors of Envoy's
// test/common/config/xds_resource_test.cc (docs/protocol.md §3.6).
var envoyRoundTrip = []string{
	"xdstp:///envoy.config.listener.v3.Listener",
	"xdstp://foo/envoy.config.listener.v3.Listener",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar/baz",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar////baz",
	"xdstp://foo/envoy.config.listener.v3.Listener?ab=cde",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar?ab=cd",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar/baz?ab=cde",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar/baz?ab=",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar/baz?=cd",
	"xdstp://foo/envoy.config.listener.v3.Listener/bar/baz?ab=cde&ba=edc&z=f",
	envoyEscapedURN,
}

const (
	envoyEscapedURN = "xdstp://f123%25%2F%3F%23o/envoy.config.listener.v3.Listener/b%25%3A%3F%23%5B%5Dar//baz" +
		"?%25%23%5B%5D%26%3D=bar&%25%23%5B%5D%26%3Dab=cde%25%23%5B%5D%26%3Df&foo=%25%23%5B%5D%26%3D"
	envoyEscapedFragment = "#entry=some_en%25%23%5B%5D%2Ctry," +
		"alt=xdstp://fo%2525%252F%253F%2523o/bar%23alt=xdstp://bar/baz%2Centry=h%2525%2523%255B%255D%252Cuh"
	envoyEscapedURL = envoyEscapedURN + envoyEscapedFragment
)

func TestTP1Examples(t *testing.T) {
	for _, s := range tp1Names {
		t.Run(s, func(t *testing.T) {
			n, err := Parse(s)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !n.IsXDSTP() {
				t.Fatalf("not xdstp")
			}
			// All TP1 examples are already canonical except the one whose
			// params are out of Envoy order.
			if got := n.String(); got != s && !strings.Contains(s, "shard_id") {
				t.Errorf("String() = %q, want %q", got, s)
			}
			_, err = ParseURN(s)
			if wantURN := !n.Glob && n.Alt == nil && n.Entry == ""; (err == nil) != wantURN {
				t.Errorf("ParseURN err = %v, want ok=%v", err, wantURN)
			}
		})
	}
}

func TestComponents(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Name
		str  string // canonical string; "" means the input itself
	}{
		{
			name: "TP1 route configuration",
			in:   "xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound",
			want: Name{
				Authority: "some.control.plane",
				Type:      "envoy.config.route.v3.RouteConfiguration",
				ID:        "foo/bar",
				Params:    []Param{{"direction", "inbound"}, {"shard_id", "1234"}},
			},
			str: "xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?direction=inbound&shard_id=1234",
		},
		{
			name: "TP1 alt",
			in:   "xdstp://some-cloud-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/foo#alt=xdstp://some-onprem-authority/envoy.config.endpoint.v3.ClusterLoadAssignment/bar",
			want: Name{
				Authority: "some-cloud-authority",
				Type:      "envoy.config.endpoint.v3.ClusterLoadAssignment",
				ID:        "foo",
				Alt: &Name{
					Authority: "some-onprem-authority",
					Type:      "envoy.config.endpoint.v3.ClusterLoadAssignment",
					ID:        "bar",
				},
			},
		},
		{
			name: "TP1 entry",
			in:   "xdstp://some-authority/envoy.config.listeners.v3.ListenerCollection/foo#entry=bar",
			want: Name{
				Authority: "some-authority",
				Type:      "envoy.config.listeners.v3.ListenerCollection",
				ID:        "foo",
				Entry:     "bar",
			},
		},
		{
			name: "TP1 glob with params",
			in:   "xdstp://some-authority/envoy.config.listener.v3.Listener/foo/*?some=thing",
			want: Name{
				Authority: "some-authority",
				Type:      "envoy.config.listener.v3.Listener",
				ID:        "foo",
				Params:    []Param{{"some", "thing"}},
				Glob:      true,
			},
		},
		{
			name: "TP1 glob my-listeners",
			in:   "xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress",
			want: Name{
				Authority: "some-authority",
				Type:      "envoy.config.listeners.v3.Listener",
				ID:        "my-listeners",
				Params:    []Param{{"node_type", "ingress"}},
				Glob:      true,
			},
		},
		{
			name: "TP1 trailing space kept in id",
			in:   "xdstp://some-authority/envoy.config.listener.v3.Listener/bar ",
			want: Name{Authority: "some-authority", Type: "envoy.config.listener.v3.Listener", ID: "bar "},
		},
		{
			name: "glob whole id",
			in:   "xdstp://a/T/*",
			want: Name{Authority: "a", Type: "T", Glob: true},
		},
		{
			name: "empty id and authority",
			in:   "xdstp:///envoy.config.listener.v3.Listener",
			want: Name{Type: "envoy.config.listener.v3.Listener"},
		},
		{
			name: "trailing slash is empty id",
			in:   "xdstp://a/T/",
			want: Name{Authority: "a", Type: "T"},
			str:  "xdstp://a/T",
		},
		{
			name: "empty segments kept",
			in:   "xdstp://foo/envoy.config.listener.v3.Listener/bar////baz",
			want: Name{Authority: "foo", Type: "envoy.config.listener.v3.Listener", ID: "bar////baz"},
		},
		{
			name: "envoy escaped URN",
			in:   envoyEscapedURN,
			want: Name{
				Authority: "f123%/?#o",
				Type:      "envoy.config.listener.v3.Listener",
				ID:        "b%:?#[]ar//baz",
				Params: []Param{
					{"%#[]&=", "bar"},
					{"%#[]&=ab", "cde%#[]&=f"},
					{"foo", "%#[]&="},
				},
			},
		},
		{
			name: "envoy escaped URL",
			in:   envoyEscapedURL,
			want: Name{
				Authority: "f123%/?#o",
				Type:      "envoy.config.listener.v3.Listener",
				ID:        "b%:?#[]ar//baz",
				Params: []Param{
					{"%#[]&=", "bar"},
					{"%#[]&=ab", "cde%#[]&=f"},
					{"foo", "%#[]&="},
				},
				Entry: "some_en%#[],try",
				Alt: &Name{
					Authority: "fo%/?#o",
					Type:      "bar",
					Alt:       &Name{Authority: "bar", Type: "baz"},
					Entry:     "h%#[],uh",
				},
			},
			str: envoyEscapedURN +
				"#alt=xdstp://fo%2525%252F%253F%2523o/bar%23alt=xdstp://bar/baz%2Centry=h%2525%2523%255B%255D%252Cuh" +
				",entry=some_en%25%23%5B%5D%2Ctry",
		},
		{
			name: "escaped slash in id",
			in:   "xdstp:///type/foo%2Fbar/baz",
			want: Name{Type: "type", ID: "foo/bar/baz"},
			str:  "xdstp:///type/foo/bar/baz",
		},
		{
			// TP1 makes a glob by appending a "/*" component, and RFC 3986
			// says an escaped reserved character is data, not syntax; the
			// star keeps its escape so that the name never re-parses as
			// the glob.
			name: "escaped star is an id, not a glob",
			in:   "xdstp://a/T/foo/%2a",
			want: Name{Authority: "a", Type: "T", ID: "foo/*"},
			str:  "xdstp://a/T/foo/%2A",
		},
		{
			name: "escaped whole-id star is an id",
			in:   "xdstp://a/T/%2A",
			want: Name{Authority: "a", Type: "T", ID: "*"},
		},
		{
			name: "star inside a segment is an id",
			in:   "xdstp://a/T/foo*",
			want: Name{Authority: "a", Type: "T", ID: "foo*"},
		},
		{
			// Envoy's decodePath gives id "/*" here and "*" for
			// "xdstp://a/T/*": an empty segment never vanishes.
			name: "glob under an empty segment",
			in:   "xdstp://a/T//*",
			want: Name{Authority: "a", Type: "T", Glob: true, emptyParent: true},
		},
		{
			name: "glob under a segment ending in an empty one",
			in:   "xdstp://a/T/foo//*",
			want: Name{Authority: "a", Type: "T", ID: "foo/", Glob: true},
		},
		{
			name: "glob under an escaped star",
			in:   "xdstp://a/T/%2A/*",
			want: Name{Authority: "a", Type: "T", ID: "*", Glob: true},
			str:  "xdstp://a/T/*/*",
		},
		{
			name: "repeated key first wins",
			in:   "xdstp://a/T/x?k=1&k=2&%6B=3",
			want: Name{Authority: "a", Type: "T", ID: "x", Params: []Param{{"k", "1"}}},
			str:  "xdstp://a/T/x?k=1",
		},
		{
			name: "empty query parts skipped, bare key",
			in:   "xdstp://a/T/x?a=1&&b&",
			want: Name{Authority: "a", Type: "T", ID: "x", Params: []Param{{"a", "1"}, {"b", ""}}},
			str:  "xdstp://a/T/x?a=1&b=",
		},
		{
			name: "bare question mark",
			in:   "xdstp://a/T/x?",
			want: Name{Authority: "a", Type: "T", ID: "x"},
			str:  "xdstp://a/T/x",
		},
		{
			name: "envoy param order differs from key order",
			in:   "xdstp://a/T/x?a=y&a.b=x",
			want: Name{Authority: "a", Type: "T", ID: "x", Params: []Param{{"a.b", "x"}, {"a", "y"}}},
			str:  "xdstp://a/T/x?a.b=x&a=y",
		},
		{
			name: "tilde and controls escaped, space not",
			in:   "xdstp://a b/T/~x%01?k=%7e v",
			want: Name{Authority: "a b", Type: "T", ID: "~x\x01", Params: []Param{{"k", "~ v"}}},
			str:  "xdstp://a b/T/%7Ex%01?k=%7E v",
		},
		{
			name: "xds. keys accepted by the parser",
			in:   "xdstp://a/T/x?xds.node.id=n",
			want: Name{Authority: "a", Type: "T", ID: "x", Params: []Param{{"xds.node.id", "n"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			assertSame(t, n, tt.want)
			want := tt.str
			if want == "" {
				want = tt.in
			}
			s := n.String()
			if s != want {
				t.Errorf("String() =\n  %q\nwant\n  %q", s, want)
			}
			n2, err := Parse(s)
			if err != nil {
				t.Fatalf("re-Parse(%q): %v", s, err)
			}
			if !n2.Equal(n) || n2.String() != s {
				t.Errorf("canonical string is not a fixed point: %#v vs %#v", n2, n)
			}
		})
	}
}

// assertSame checks the fields exactly (not just Equal), so that the
// canonical Params order is checked too.
func assertSame(t *testing.T, got, want Name) {
	t.Helper()
	if got.Authority != want.Authority || got.Type != want.Type || got.ID != want.ID ||
		got.Glob != want.Glob || got.emptyParent != want.emptyParent || got.Entry != want.Entry {
		t.Errorf("got {Authority:%q Type:%q ID:%q Glob:%v emptyParent:%v Entry:%q}, want {Authority:%q Type:%q ID:%q Glob:%v emptyParent:%v Entry:%q}",
			got.Authority, got.Type, got.ID, got.Glob, got.emptyParent, got.Entry,
			want.Authority, want.Type, want.ID, want.Glob, want.emptyParent, want.Entry)
	}
	if !slices.Equal(got.Params, want.Params) {
		t.Errorf("Params = %q, want %q", got.Params, want.Params)
	}
	switch {
	case (got.Alt == nil) != (want.Alt == nil):
		t.Errorf("Alt = %v, want %v", got.Alt, want.Alt)
	case got.Alt != nil:
		assertSame(t, *got.Alt, *want.Alt)
	}
	if !got.Equal(want) {
		t.Errorf("not Equal: %#v vs %#v", got, want)
	}
}

func TestEnvoyRoundTrip(t *testing.T) {
	for _, s := range envoyRoundTrip {
		t.Run(s, func(t *testing.T) {
			for _, parse := range []func(string) (Name, error){Parse, ParseURN} {
				n, err := parse(s)
				if err != nil {
					t.Fatal(err)
				}
				if got := n.String(); got != s {
					t.Errorf("String() = %q, want %q", got, s)
				}
				c, err := Canonical(s)
				if err != nil || c != s {
					t.Errorf("Canonical = %q, %v", c, err)
				}
			}
		})
	}
}

func TestLegacy(t *testing.T) {
	for _, s := range []string{"", "foo", "http://a/b", "file:///x", "XDSTP://a/T/x", "xdstp", "listener_0", "%zz"} {
		t.Run(s, func(t *testing.T) {
			n, err := Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			if n.IsXDSTP() || n.String() != s || !n.Equal(Legacy(s)) {
				t.Errorf("Parse(%q) = %#v", s, n)
			}
			if _, err := ParseURN(s); err != nil {
				t.Errorf("ParseURN: %v", err)
			}
			if c, err := Canonical(s); err != nil || c != s {
				t.Errorf("Canonical = %q, %v", c, err)
			}
			if n.Locator() != nil || n.ResourceName() != nil {
				t.Errorf("legacy name has proto form")
			}
		})
	}
	if !(Name{}).Equal(Legacy("")) || (Name{}).String() != "" {
		t.Error(`zero Name is not Legacy("")`)
	}
	if Legacy("a").Equal(Legacy("b")) || Legacy("a").Equal(MustParse("xdstp://a/T")) {
		t.Error("distinct names Equal")
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		name  string
		a, b  string
		equal bool
	}{
		{"param order", "xdstp://a/T/x?b=2&a=1", "xdstp://a/T/x?a=1&b=2", true},
		{"unneeded escape", "xdstp://a/T/%41?k=%41", "xdstp://a/T/A?k=A", true},
		{"hex case", "xdstp://%3f/T/x%3a?k=%3d", "xdstp://%3F/T/x%3A?k=%3D", true},
		{"authority escape", "xdstp://%61/T/x", "xdstp://a/T/x", true},
		{"directive escapes", "xdstp://a/T/x#entry=%62", "xdstp://a/T/x#entry=b", true},
		{"directive order", "xdstp://a/T/x#entry=e,alt=xdstp://b/T/y", "xdstp://a/T/x#alt=xdstp://b/T/y,entry=e", true},
		{"different value", "xdstp://a/T/x?k=1", "xdstp://a/T/x?k=2", false},
		{"extra param", "xdstp://a/T/x?k=1", "xdstp://a/T/x?k=1&j=2", false},
		{"missing vs empty param", "xdstp://a/T/x", "xdstp://a/T/x?k=", false},
		{"glob", "xdstp://a/T/x/*", "xdstp://a/T/x", false},
		{"glob under an empty segment", "xdstp://a/T//*", "xdstp://a/T/*", false},
		{"globs under empty segments", "xdstp://a/T/x//*", "xdstp://a/T/x/*", false},
		{"escaped star is not a glob", "xdstp://a/T/%2A", "xdstp://a/T/*", false},
		{"escaped star under a path", "xdstp://a/T/x/%2a", "xdstp://a/T/x/*", false},
		{"escaped star spellings", "xdstp://a/T/x/%2a", "xdstp://a/T/x/%2A", true},
		{"empty id vs empty segment", "xdstp://a/T", "xdstp://a/T//", false},
		{"authority", "xdstp://a/T/x", "xdstp://b/T/x", false},
		{"type", "xdstp://a/T/x", "xdstp://a/U/x", false},
		{"id", "xdstp://a/T/x", "xdstp://a/T/y", false},
		{"alt", "xdstp://a/T/x#alt=xdstp://b/T/y", "xdstp://a/T/x#alt=xdstp://b/T/z", false},
		{"alt vs none", "xdstp://a/T/x#alt=xdstp://b/T/y", "xdstp://a/T/x", false},
		{"entry", "xdstp://a/T/x#entry=e", "xdstp://a/T/x#entry=f", false},
		{"legacy vs xdstp", "foo", "xdstp://a/T/foo", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := MustParse(tt.a), MustParse(tt.b)
			if a.Equal(b) != tt.equal || b.Equal(a) != tt.equal {
				t.Errorf("Equal = %v, want %v", a.Equal(b), tt.equal)
			}
			if (a.String() == b.String()) != tt.equal {
				t.Errorf("String() %q vs %q, want equal=%v", a.String(), b.String(), tt.equal)
			}
		})
	}
}

// Names built as struct literals need not be canonical; Equal and String
// must still treat them by component.
func TestNonCanonicalLiteral(t *testing.T) {
	lit := Name{Type: "T", ID: "x", Params: []Param{{"b", "2"}, {"a", "1"}, {"b", "3"}}}
	want := MustParse("xdstp:///T/x?a=1&b=2")
	if !lit.Equal(want) || !want.Equal(lit) {
		t.Errorf("literal %v not Equal to %v", lit.Params, want.Params)
	}
	if got := lit.String(); got != want.String() {
		t.Errorf("String() = %q, want %q", got, want.String())
	}
	if v, ok := lit.Param("b"); !ok || v != "2" {
		t.Errorf(`Param("b") = %q, %v`, v, ok)
	}
	if !slices.Equal(lit.Params, []Param{{"b", "2"}, {"a", "1"}, {"b", "3"}}) {
		t.Error("String or Equal modified Params")
	}
}

func TestErrors(t *testing.T) {
	deepAlt := "xdstp://a/T/x" + strings.Repeat("#alt=xdstp://a/T/x", maxAltDepth+1)
	okAlt := "xdstp://a/T/x" + strings.Repeat("#alt=xdstp://a/T/x", maxAltDepth)
	if _, err := Parse(okAlt); err != nil {
		t.Fatalf("alt nested %d deep: %v", maxAltDepth, err)
	}
	tests := []struct {
		name   string
		in     string
		urn    bool // use ParseURN
		offset int
		msg    string
	}{
		{"bad percent escape in id", "xdstp://a/T/b%zzar", false, 13, `invalid percent-escape "%zz"`},
		{"truncated percent escape", "xdstp://a/T/bar%4", false, 15, `invalid percent-escape "%4"`},
		{"percent at end", "xdstp://a/T/bar%", false, 15, `invalid percent-escape "%"`},
		{"bad escape in authority", "xdstp://%g0/T", false, 8, `invalid percent-escape "%g0"`},
		{"bad escape in key", "xdstp://a/T/x?a=1&%=2", false, 18, `invalid percent-escape "%"`},
		{"bad escape in value", "xdstp://a/T/x?a=%%", false, 16, `invalid percent-escape "%%"`},
		{"bad escape in entry", "xdstp://a/T/x#entry=%q1", false, 20, `invalid percent-escape "%q1"`},
		{"single slash scheme", "xdstp:/x", false, 6, `missing "//"`},
		{"scheme only", "xdstp:", false, 6, `missing "//"`},
		{"missing type", "xdstp://foo", true, 11, "resource type missing"},
		{"missing type URL", "xdstp://foo", false, 11, "resource type missing"},
		{"query before type", "xdstp://foo?a=b/T", false, 11, "resource type missing"},
		{"fragment before type", "xdstp://foo#entry=a/T", false, 11, "resource type missing"},
		{"empty type", "xdstp://foo//bar", false, 12, "resource type empty"},
		{"empty type at end", "xdstp://foo/", false, 12, "resource type empty"},
		{"empty type before query", "xdstp://foo/?a=b", false, 12, "resource type empty"},
		{"bad type chars", "xdstp://foo/envoy.Lis:tener/x", false, 21, `invalid character ":" in resource type`},
		{"escaped type", "xdstp://foo/T%41/x", false, 13, `invalid character "%" in resource type`},
		{"unknown directive", "xdstp://foo/some-type#bar=baz", false, 22, `unknown directive "bar=baz"`},
		{"directive without value", "xdstp://foo/T#alt", false, 14, `unknown directive "alt"`},
		{"repeated alt", "xdstp://a/T/x#alt=xdstp://b/T,alt=xdstp://c/T", false, 30, `directive "alt" repeated`},
		{"repeated entry", "xdstp://a/T/x#entry=a,entry=a", false, 22, `directive "entry" repeated`},
		{"empty fragment", "xdstp://a/T/x#", false, 14, "empty directive"},
		{"empty directive", "xdstp://a/T/x#entry=a,", false, 22, "empty directive"},
		{"empty entry", "xdstp://a/T/x#entry=", false, 20, "empty entry"},
		{"alt not xdstp", "xdstp://a/T/x#alt=http://b/T/y", false, 18, "alt is not an xdstp name"},
		{"alt empty", "xdstp://a/T/x#alt=", false, 18, "alt is not an xdstp name"},
		{"alt invalid", "xdstp://a/T/x#alt=xdstp://b", false, 18, "in alt at byte 9: resource type missing"},
		{"alt depth bomb", deepAlt, false, len("xdstp://a/T/x#alt="), "nested more than 8 deep"},
		{"URN with glob", "xdstp://a/T/foo/*?k=v", true, 16, "glob not allowed in a URN"},
		{"URN with whole-id glob", "xdstp://a/T/*", true, 12, "glob not allowed in a URN"},
		{"URN with glob under an empty segment", "xdstp://a/T//*?k=v", true, 13, "glob not allowed in a URN"},
		{"URN with entry", "xdstp://a/T/foo#entry=x", true, 15, "directives not allowed in a URN"},
		{"URN with alt", "xdstp://a/T/foo?k=v#alt=xdstp://b/T/y", true, 19, "directives not allowed in a URN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.urn {
				_, err = ParseURN(tt.in)
			} else {
				_, err = Parse(tt.in)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Input != tt.in {
				t.Errorf("Input = %q, want %q", e.Input, tt.in)
			}
			if e.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d (%v)", e.Offset, tt.offset, e)
			}
			if !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", e.Msg, tt.msg)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	_, err := ParseURN("xdstp://foo")
	if got, want := err.Error(), `name "xdstp://foo": at byte 11: resource type missing`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	MustParse("xdstp://foo")
}

func TestProtoRoundTrip(t *testing.T) {
	names := append(slices.Clone(tp1Names), envoyRoundTrip...)
	names = append(names,
		envoyEscapedURL,
		"xdstp://a/T/*",
		"xdstp://a/T//*",
		"xdstp://a/T/foo/*?b=1&a=2#alt=xdstp://b/T/bar/*?c=3#entry=e,entry=f",
	)
	for _, s := range names {
		t.Run(s, func(t *testing.T) {
			n := MustParse(s)
			l := n.Locator()
			if l.GetScheme() != xdscorev3.ResourceLocator_XDSTP {
				t.Errorf("scheme = %v", l.GetScheme())
			}
			back, err := FromLocator(l)
			if err != nil {
				t.Fatalf("FromLocator: %v", err)
			}
			if !back.Equal(n) || back.String() != n.String() {
				t.Errorf("FromLocator(Locator()) = %v, want %v", back, n)
			}
			// Through the wire too, since map order and nil-vs-empty
			// change there.
			b, err := proto.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var l2 xdscorev3.ResourceLocator
			if err := proto.Unmarshal(b, &l2); err != nil {
				t.Fatal(err)
			}
			if back, err := FromLocator(&l2); err != nil || !back.Equal(n) {
				t.Errorf("after marshal: %v, %v", back, err)
			}

			r := n.ResourceName()
			back, err = FromResourceName(r)
			if err != nil {
				t.Fatalf("FromResourceName: %v", err)
			}
			if !back.Equal(n.URN()) {
				t.Errorf("FromResourceName(ResourceName()) = %v, want %v", back, n.URN())
			}
		})
	}
}

func TestLocatorFields(t *testing.T) {
	n := MustParse("xdstp://a/T/foo/*?k=v#alt=xdstp://b/U/*,entry=e")
	l := n.Locator()
	if l.GetId() != "foo/*" || l.GetAuthority() != "a" || l.GetResourceType() != "T" ||
		l.GetExactContext().GetParams()["k"] != "v" || len(l.GetDirectives()) != 2 ||
		l.GetDirectives()[0].GetAlt().GetId() != "*" || l.GetDirectives()[1].GetEntry() != "e" {
		t.Errorf("Locator() = %v", l)
	}
	r := MustParse("xdstp://a/T/foo?k=v").ResourceName()
	if r.GetId() != "foo" || r.GetAuthority() != "a" || r.GetResourceType() != "T" || r.GetContext().GetParams()["k"] != "v" {
		t.Errorf("ResourceName() = %v", r)
	}
}

// The proto forms carry a glob in Id, spelled as Envoy's decodeUrl would
// leave it, so that the globs "*" and "/*" stay apart there too.
func TestGlobProtoID(t *testing.T) {
	tests := []struct{ in, id string }{
		{"xdstp://a/T/*", "*"},
		{"xdstp://a/T//*", "/*"},
		{"xdstp://a/T/foo/*", "foo/*"},
		{"xdstp://a/T/foo//*", "foo//*"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n := MustParse(tt.in)
			if got := n.Locator().GetId(); got != tt.id {
				t.Errorf("Locator().Id = %q, want %q", got, tt.id)
			}
			if got := n.ResourceName().GetId(); got != tt.id {
				t.Errorf("ResourceName().Id = %q, want %q", got, tt.id)
			}
			back, err := FromLocator(&xdscorev3.ResourceLocator{Authority: "a", ResourceType: "T", Id: tt.id})
			if err != nil || !back.Equal(n) || back.String() != tt.in {
				t.Errorf("FromLocator(Id %q) = %v, %v; want %s", tt.id, back, err, tt.in)
			}
		})
	}
}

// An escaped star is an id character, so a URN may end in one.
func TestEscapedStarURN(t *testing.T) {
	for in, id := range map[string]string{"xdstp://a/T/%2A": "*", "xdstp://a/T/foo/%2a?k=v": "foo/*"} {
		n, err := ParseURN(in)
		if err != nil || n.Glob || n.ID != id {
			t.Errorf("ParseURN(%q) = ID %q Glob %v, %v; want ID %q, not a glob", in, n.ID, n.Glob, err, id)
		}
		if _, ok := n.GlobCollection(); !ok {
			t.Errorf("%s belongs to no glob", in)
		}
	}
}

func TestFromProtoErrors(t *testing.T) {
	alt := func(l *xdscorev3.ResourceLocator) *xdscorev3.ResourceLocator_Directive {
		return &xdscorev3.ResourceLocator_Directive{Directive: &xdscorev3.ResourceLocator_Directive_Alt{Alt: l}}
	}
	entry := func(e string) *xdscorev3.ResourceLocator_Directive {
		return &xdscorev3.ResourceLocator_Directive{Directive: &xdscorev3.ResourceLocator_Directive_Entry{Entry: e}}
	}
	ok := func() *xdscorev3.ResourceLocator { return &xdscorev3.ResourceLocator{ResourceType: "T"} }
	deep := ok()
	for range maxAltDepth + 1 {
		l := ok()
		l.Directives = []*xdscorev3.ResourceLocator_Directive{alt(deep)}
		deep = l
	}
	tests := []struct {
		name string
		l    *xdscorev3.ResourceLocator
	}{
		{"nil", nil},
		{"http", &xdscorev3.ResourceLocator{Scheme: xdscorev3.ResourceLocator_HTTP, ResourceType: "T"}},
		{"file", &xdscorev3.ResourceLocator{Scheme: xdscorev3.ResourceLocator_FILE, Id: "x"}},
		{"no type", &xdscorev3.ResourceLocator{Id: "x"}},
		{"bad type", &xdscorev3.ResourceLocator{ResourceType: "a/b"}},
		{"alt http", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{
			alt(&xdscorev3.ResourceLocator{Scheme: xdscorev3.ResourceLocator_HTTP, ResourceType: "T"})}}},
		{"alt nil", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{alt(nil)}}},
		{"alt repeated", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{alt(ok()), alt(ok())}}},
		{"entry repeated", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{entry("a"), entry("b")}}},
		{"entry empty", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{entry("")}}},
		{"directive unset", &xdscorev3.ResourceLocator{ResourceType: "T", Directives: []*xdscorev3.ResourceLocator_Directive{{}}}},
		{"alt too deep", deep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n, err := FromLocator(tt.l); err == nil {
				t.Errorf("FromLocator = %v, want error", n)
			}
		})
	}
	if _, err := FromResourceName(nil); err == nil {
		t.Error("FromResourceName(nil): no error")
	}
	if _, err := FromResourceName(&xdscorev3.ResourceName{Id: "x"}); err == nil {
		t.Error("FromResourceName without type: no error")
	}
}

func TestGlobCollection(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" means ok=false
	}{
		{"nested id", "xdstp://a/T/foo/bar?p=1", "xdstp://a/T/foo/*?p=1"},
		{"single segment", "xdstp://a/T/bar", "xdstp://a/T/*"},
		{"directives dropped", "xdstp://a/T/foo/bar#entry=e", "xdstp://a/T/foo/*"},
		{"TP1 my-listeners", "xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/foo?node_type=ingress",
			"xdstp://some-authority/envoy.config.listeners.v3.Listener/my-listeners/*?node_type=ingress"},
		{"glob", "xdstp://a/T/foo/*", ""},
		// Envoy's watchesInterestedIn cuts at the last '/': id "/x" is
		// under glob id "/*", id "x" under "*".
		{"leading empty segment", "xdstp://a/T//x", "xdstp://a/T//*"},
		{"empty segment before the last", "xdstp://a/T/foo//x?p=1", "xdstp://a/T/foo//*?p=1"},
		{"escaped star id", "xdstp://a/T/foo/%2A", "xdstp://a/T/foo/*"},
		{"empty id", "xdstp://a/T", ""},
		{"legacy", "foo/bar", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ok := MustParse(tt.in).GlobCollection()
			if ok != (tt.want != "") {
				t.Fatalf("ok = %v, want %v", ok, tt.want != "")
			}
			if !ok {
				return
			}
			if g.String() != tt.want || !g.Equal(MustParse(tt.want)) || !g.Glob || g.Alt != nil || g.Entry != "" {
				t.Errorf("GlobCollection() = %#v, want %q", g, tt.want)
			}
		})
	}
}

func TestWithParams(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ps   []Param
		want string
	}{
		{"add", "xdstp://a/T/x?b=1", []Param{{"a", "2"}}, "xdstp://a/T/x?a=2&b=1"},
		{"override", "xdstp://a/T/x?b=1", []Param{{"b", "2"}}, "xdstp://a/T/x?b=2"},
		{"later wins", "xdstp://a/T/x", []Param{{"b", "1"}, {"b", "2"}}, "xdstp://a/T/x?b=2"},
		{"none", "xdstp://a/T/x?b=1", nil, "xdstp://a/T/x?b=1"},
		{"to empty", "xdstp://a/T/x", []Param{{"xds.node.id", "n"}}, "xdstp://a/T/x?xds.node.id=n"},
		{"keeps directives", "xdstp://a/T/x#entry=e", []Param{{"k", "v"}}, "xdstp://a/T/x?k=v#entry=e"},
		{"legacy unchanged", "foo", []Param{{"k", "v"}}, "foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := MustParse(tt.in)
			before := slices.Clone(n.Params)
			got := n.WithParams(tt.ps...)
			if got.String() != tt.want {
				t.Errorf("WithParams = %q, want %q", got.String(), tt.want)
			}
			if !slices.Equal(got.Params, MustParse(tt.want).Params) {
				t.Errorf("Params %q not canonical", got.Params)
			}
			if !slices.Equal(n.Params, before) {
				t.Error("WithParams modified the receiver")
			}
		})
	}
	// The result must not share the receiver's backing array.
	n := MustParse("xdstp://a/T/x?a=1&b=2")
	m := n.WithParams(Param{"a", "9"})
	m.Params[1].Value = "changed"
	if v, _ := n.Param("b"); v != "2" {
		t.Error("WithParams result aliases the receiver")
	}
}

func TestURN(t *testing.T) {
	n := MustParse(envoyEscapedURL)
	if got := n.URN().String(); got != envoyEscapedURN {
		t.Errorf("URN() = %q, want %q", got, envoyEscapedURN)
	}
	g := MustParse("xdstp://a/T/x/*?k=v#entry=e").URN()
	if !g.Glob || g.Entry != "" || g.String() != "xdstp://a/T/x/*?k=v" {
		t.Errorf("URN() of glob = %v", g)
	}
	if n.Alt == nil || n.Entry == "" {
		t.Error("URN modified the receiver")
	}
	if l := Legacy("foo").URN(); l.String() != "foo" {
		t.Errorf("URN() of legacy = %q", l)
	}
}

func TestParam(t *testing.T) {
	n := MustParse("xdstp://a/T/x?k=v&e=")
	if v, ok := n.Param("k"); !ok || v != "v" {
		t.Errorf(`Param("k") = %q, %v`, v, ok)
	}
	if v, ok := n.Param("e"); !ok || v != "" {
		t.Errorf(`Param("e") = %q, %v`, v, ok)
	}
	if _, ok := n.Param("missing"); ok {
		t.Error(`Param("missing") found`)
	}
}

func TestManyParams(t *testing.T) {
	// Past the small-list dedupe path.
	var b strings.Builder
	b.WriteString("xdstp://a/T/x?")
	for i := range 40 {
		b.WriteString("k")
		b.WriteByte(byte('a' + i%20))
		b.WriteString("=")
		b.WriteByte(byte('0' + i/20))
		b.WriteString("&")
	}
	n := MustParse(b.String())
	if len(n.Params) != 20 {
		t.Fatalf("got %d params, want 20", len(n.Params))
	}
	for _, p := range n.Params {
		if p.Value != "0" {
			t.Errorf("param %v: first value did not win", p)
		}
	}
}

func TestParseAllocs(t *testing.T) {
	s := "xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound"
	if a := testing.AllocsPerRun(100, func() { _, _ = Parse(s) }); a > 1 {
		t.Errorf("Parse: %v allocs, want <= 1", a)
	}
	n := MustParse(s)
	if a := testing.AllocsPerRun(100, func() { _ = n.String() }); a > 1 {
		t.Errorf("String: %v allocs, want <= 1", a)
	}
}

func BenchmarkParse(b *testing.B) {
	s := "xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkString(b *testing.B) {
	n := MustParse("xdstp://some.control.plane/envoy.config.route.v3.RouteConfiguration/foo/bar?shard_id=1234&direction=inbound")
	b.ReportAllocs()
	for b.Loop() {
		_ = n.String()
	}
}
