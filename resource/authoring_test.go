package resource

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/constraint"
)

func TestDecodeForms(t *testing.T) {
	cluster := `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", "type": "EDS", "eds_cluster_config": {"eds_config": {"ads": {}}}}`
	tests := []struct {
		name   string
		src    string
		names  []string
		lines  []int
		consts []string
	}{
		{"json object", cluster, []string{"c1"}, []int{1}, []string{""}},
		{"json array", "[\n" + cluster + ",\n" + strings.Replace(cluster, `"c1"`, `"c2"`, 1) + "\n]", []string{"c1", "c2"}, []int{2, 3}, []string{"", ""}},
		{"yaml multi", "# leading comment\n---\n\"@type\": envoy.config.cluster.v3.Cluster\nname: a\n---\n---\n# empty above\n\"@type\": envoy.config.cluster.v3.Cluster\nname: b\n", []string{"a", "b"}, []int{3, 8}, []string{"", ""}},
		{"wrapper fills payload name", "name: w\nconstraints: env=prod\nresource:\n  \"@type\": envoy.config.cluster.v3.Cluster\n", []string{"w"}, []int{1}, []string{"env=prod"}},
		{"alias type and xdstp name normalized", "type: cds\nname: xdstp://auth/envoy.config.cluster.v3.Cluster/x?b=2&a=1\nresource:\n  \"@type\": envoy.config.cluster.v3.Cluster\n  name: xdstp://auth/envoy.config.cluster.v3.Cluster/x?a=1&b=%32\n", []string{"xdstp://auth/envoy.config.cluster.v3.Cluster/x?a=1&b=2"}, []int{1}, []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Decode("f.yaml", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) != len(tc.names) {
				t.Fatalf("got %d documents, want %d", len(docs), len(tc.names))
			}
			for i, d := range docs {
				if d.Variant.Name != tc.names[i] || d.Line != tc.lines[i] || d.Index != i+1 || d.Variant.Constraints.String() != tc.consts[i] {
					t.Errorf("doc %d = %q line %d index %d constraints %q; want %q line %d index %d constraints %q",
						i, d.Variant.Name, d.Line, d.Index, d.Variant.Constraints, tc.names[i], tc.lines[i], i+1, tc.consts[i])
				}
				if got := d.Message.(*clusterv3.Cluster).GetName(); got == "" {
					t.Errorf("payload name not filled in")
				}
			}
		})
	}
}

// Each kind of bad input gets its own precise error: what, and where.
func TestDecodeErrors(t *testing.T) {
	const cl = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error, all required
	}{
		{"malformed name", cl + "name: \"xdstp://a/envoy.config.cluster.v3.Cluster/x%zz\"\n",
			[]string{"f.yaml:2:7: document 1: name:", "at byte 43", "percent"}},
		{"xdstp type mismatch", cl + "name: xdstp://a/envoy.config.listener.v3.Listener/x\n",
			[]string{"document 1", "name:", "resource type envoy.config.listener.v3.Listener", "is a envoy.config.cluster.v3.Cluster"}},
		{"reserved context param", cl + "name: xdstp://a/envoy.config.cluster.v3.Cluster/x?xds.node.id=1\n",
			[]string{"name:", "reserved xds. namespace"}},
		{"bad constraint syntax", "constraints: env=prod &&\nresource:\n  " + cl + "  name: c\n",
			[]string{"f.yaml:1:14: document 1: constraints:", "at byte"}},
		{"overlapping variants", "constraints: env=prod || env=test\nresource:\n  " + cl + "  name: c\n---\nconstraints: env=qa || env=test\nresource:\n  " + cl + "  name: c\n",
			[]string{"constraints:", "overlap", "env=test", "document 1", "document 2"}},
		{"different key sets", "constraints: env=prod\nresource:\n  " + cl + "  name: c\n---\nconstraints: env=prod && version=v1\nresource:\n  " + cl + "  name: c\n",
			[]string{"constraints:", "version"}},
		{"payload fails ValidateAll", "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: vh\n  domains: []\n",
			[]string{"virtual_hosts[0].domains", "at least 1"}},
		{"nested Any fails validation", "\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: l\napi_listener:\n  api_listener:\n    \"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n    rds: {route_config_name: r, config_source: {ads: {}}}\n",
			[]string{"api_listener.api_listener.stat_prefix"}},
		{"name/payload mismatch", "name: a\nresource:\n  " + cl + "  name: b\n",
			[]string{"resource.name:", `"b" differs from the resource name "a"`}},
		{"unknown field with path", "\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: vh\n  domains: [\"*\"]\n  routes:\n  - match: {prefix: \"\"}\n    bogus: 1\n",
			[]string{"virtual_hosts[0].routes[0].bogus", "unknown field"}},
		{"bad enum", cl + "name: c\nlb_policy: FASTEST\n", []string{"lb_policy", "FASTEST"}},
		{"missing type", "name: c\n", []string{"resource: missing"}},
		{"unknown wrapper key", "nmae: c\nresource:\n  " + cl + "  name: c\n", []string{"nmae: unknown field"}},
		{"unknown message", "\"@type\": type.googleapis.com/foo.Bar\nname: x\n", []string{"f.yaml:1:10: document 1: @type: unknown type \"type.googleapis.com/foo.Bar\"", "a resource is one of the xDS resource types"}},
		{"not an xDS type", "\"@type\": type.googleapis.com/envoy.config.core.v3.Address\n", []string{"not an xDS resource type"}},
		{"payload type differs", "type: lds\nresource:\n  " + cl + "  name: c\n", []string{"type:", "not a envoy.config.listener.v3.Listener"}},
		{"yaml syntax", cl + "name: c\n---\n" + cl + "name: [\n", []string{"f.yaml:5: document 2: invalid YAML: a [ or { opened on this line is never closed"}},
		{"unclosed flow sequence is on its own line", cl + "name: [a\ntype: EDS\n", []string{"f.yaml:2: document 1: invalid YAML: a [ or { opened on this line is never closed"}},
		{"a tab in the indentation is on its own line", cl + "name: a\n\ttype: EDS\n", []string{"f.yaml:3: document 1: invalid YAML: a tab in the indentation"}},
		{"a flow list across lines, then a tab", cl + "name: a\nhealth_checks: [\n  ]\n\ttype: EDS\n", []string{"f.yaml:5: document 1: invalid YAML: a tab"}},
		{"duration as a number", cl + "name: c\nconnect_timeout: 5\n", []string{"f.yaml:3:18: document 1: connect_timeout:", `a duration is a string of seconds ending in "s", e.g. "5s"`}},
		{"enum misspelled", cl + "name: c\ntype: EDSS\n", []string{"f.yaml:3:7: document 1: type:", "(did you mean EDS?)", "DiscoveryType takes STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST"}},
		{"field misspelled", cl + "name: c\nconect_timeout: 5s\n", []string{"conect_timeout", "(did you mean connect_timeout?)"}},
		{"field at the wrong level", cl + "name: c\ntype: EDS\neds_config: {ads: {}}\n", []string{"f.yaml:4:1: document 1: eds_config: unknown field", "did you mean eds_cluster_config.eds_config?"}},
		{"JSON field at the wrong level", `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c", "edsConfig": {}}`, []string{"unknown field", "did you mean edsClusterConfig.edsConfig?"}},
		{"duplicate variant", cl + "name: c\n---\n" + cl + "name: c\n", []string{"document 2", "defined twice", "document 1"}},
		{"missing name", cl + "type: EDS\n", []string{"name: missing"}},
		{"vhost without route config", "\"@type\": type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: vh\ndomains: [\"*\"]\n", []string{"<route configuration name>/<virtual host name>"}},
		{"redirect to glob", "type: lds\nname: xdstp://a/envoy.config.listener.v3.Listener/x\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: a\n  resource_type: envoy.config.listener.v3.Listener\n  id: y/*\n",
			[]string{"not a glob"}},
		{"collection entry of wrong type", "name: xdstp://a/envoy.config.listener.v3.ListenerCollection/c\nresource:\n  \"@type\": type.googleapis.com/envoy.config.listener.v3.ListenerCollection\n  entries:\n  - locator: {authority: a, resource_type: envoy.config.cluster.v3.Cluster, id: x}\n",
			[]string{"resource.entries[0].locator", "holds envoy.config.listener.v3.Listener"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Decode("f.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("no error; decoded %d documents", len(docs))
			}
			var de *DocError
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a DocError: %v", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCollectionsAndRedirects(t *testing.T) {
	src := `name: xdstp://a/envoy.config.cluster.v3.ClusterCollection/all
resource:
  "@type": type.googleapis.com/envoy.config.cluster.v3.ClusterCollection
  entries:
  - locator: {authority: a, resource_type: envoy.config.cluster.v3.Cluster, id: one}
  - inline_entry:
      name: two
      version: "1"
      resource:
        "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
        name: two
---
type: cds
name: xdstp://a/envoy.config.cluster.v3.Cluster/old
resource:
  "@type": type.googleapis.com/xds.core.v3.ResourceLocator
  authority: b
  resource_type: envoy.config.cluster.v3.Cluster
  id: new
`
	docs, err := Decode("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := CollectionEntries(docs[0].Variant.Body())
	if err != nil || len(entries) != 2 {
		t.Fatalf("entries = %v, %v; want 2 (ClusterCollection's singular field read as repeated)", entries, err)
	}
	if entries[1].GetInlineEntry().GetName() != "two" || entries[0].GetLocator().GetId() != "one" {
		t.Errorf("entries = %v", entries)
	}
	r := docs[1].Variant
	if !r.IsRedirect() || r.Type.URL != ClusterURL || r.PayloadURL != LocatorURL {
		t.Errorf("redirect variant: type %s payload %s", r.Type.URL, r.PayloadURL)
	}
	m, err := r.Message()
	if err != nil || m.(*xdscorev3.ResourceLocator).GetAuthority() != "b" {
		t.Errorf("redirect payload %v %v", m, err)
	}
}

func TestRegistryLookup(t *testing.T) {
	for _, s := range []string{"cds", "CDS", "cluster", ClusterURL, "envoy.config.cluster.v3.Cluster"} {
		typ, err := Lookup(s)
		if err != nil || typ.URL != ClusterURL {
			t.Errorf("Lookup(%q) = %v, %v", s, typ, err)
		}
	}
	for s, url := range map[string]string{"lds": ListenerURL, "rds": RouteURL, "eds": EndpointURL, "vhds": VirtualHostURL, "sds": SecretURL, "rtds": RuntimeURL, "ecds": ExtensionConfigURL, "srds": ScopedRouteURL, "leds": LbEndpointURL, "listenercollection": ListenerCollectionURL, "redirect": LocatorURL} {
		if typ, err := Lookup(s); err != nil || typ.URL != url {
			t.Errorf("Lookup(%q) = %v, %v; want %s", s, typ, err, url)
		}
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "cds") {
		t.Errorf("Lookup(nope) error = %v", err)
	}
	o := ForURL("type.googleapis.com/example.Unknown")
	if o.Known || o.URL != "type.googleapis.com/example.Unknown" || o.Name != "example.Unknown" {
		t.Errorf("opaque type: %+v", o)
	}
	// A peer naming made-up types does not grow the registry.
	before := len(Types())
	for i := range 100 {
		if u := fmt.Sprintf("type.googleapis.com/made.Up%d", i); ForURL(u).URL != u {
			t.Fatalf("ForURL(%s) describes another type", u)
		}
	}
	if _, err := Lookup("made.Up1"); err == nil || len(Types()) != before {
		t.Errorf("made-up types registered")
	}
	if ts := Types(); ts[0].URL != ClusterURL {
		t.Errorf("ADS order starts with %s, want clusters", ts[0].URL)
	}
}

// A variant's payload is encoded once as a google.protobuf.Any, and a copy
// with another version shares it.
func TestVariantEncoding(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "r"}
	body, err := Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVariant(ForURL(RouteURL), "r", constraint.MustParse("env=prod"), "7", "", body)
	var a anypb.Any
	if err := proto.Unmarshal(v.Any(), &a); err != nil || a.TypeUrl != RouteURL {
		t.Fatalf("Any: %v %v", a.TypeUrl, err)
	}
	var got routev3.RouteConfiguration
	if err := a.UnmarshalTo(&got); err != nil || !proto.Equal(&got, rc) {
		t.Errorf("payload: %v %v", &got, err)
	}
	if nv := v.WithVersion("8"); nv.Version != "8" || &nv.Body()[0] != &v.Body()[0] {
		t.Errorf("WithVersion must share the payload")
	}
}

func TestPathAtAndOffsetOf(t *testing.T) {
	js := []byte("{\n \"a\": {\n  \"b_c\": [\n   1,\n   {\n    \"dE\": true\n   }\n  ]\n },\n \"d\": \"x\"\n}")
	for path, want := range map[string]string{"a": `{`, "a.b_c": `[`, "a.b_c[0]": "1", "a.b_c[1].d_e": `true`, "d": `"x"`, "a.b_c[1].missing": "{\n    \"dE"} {
		off := offsetOf(js, path)
		if got := string(js[off : off+len(want)]); got != want {
			t.Errorf("offsetOf(%s) at %q, want %q", path, got, want)
		}
		if !strings.Contains(path, "missing") {
			if got := pathAt(js, off); got != strings.ReplaceAll(path, "d_e", "dE") {
				t.Errorf("pathAt(offsetOf(%s)) = %s", path, got)
			}
		}
	}
}

// Input the YAML or JSON layer would silently change, or reports in the
// wrong terms, is rejected with an error naming the file, document, line
// and field. Each want is the whole error, so the wording is pinned too.
func TestDecodeInputErrors(t *testing.T) {
	const (
		cl      = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"
		res     = "resource: {\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: c}\n"
		jsonRes = `"resource": {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c"}`
	)
	tests := []struct {
		name, source, src string
		want              []string // the ErrorList, one DocError each
	}{
		// 1. A plain YAML scalar starting with "!" is a tag: v2 keeps
		// only what follows it, so these would be unconstrained.
		{"constraint read as a tag", "f.yaml", "name: c\nconstraints: !(env=prod)\n" + res, []string{
			`f.yaml:2:14: document 1: constraints: YAML reads !(env=prod) as a tag, not as text, so the constraint would be dropped and the variant would match every client; quote a value that starts with "!": constraints: "!(env=prod)"`}},
		{"TP2 default read as a tag", "f.yaml", "# the default\nname: c\nconstraints: !exists(version)   # unversioned clients\n" + res, []string{
			`f.yaml:3:14: document 1: constraints: YAML reads !exists(version) as a tag, not as text, so the constraint would be dropped and the variant would match every client; quote a value that starts with "!": constraints: "!exists(version)"`}},
		{"tag keeps only the rest", "f.yaml", "name: c\nconstraints: !exists(v) env=prod\n" + res, []string{
			`f.yaml:2:14: document 1: constraints: YAML reads !exists(v) as a tag, not as text, so only "env=prod" would be kept; quote a value that starts with "!": constraints: "!exists(v) env=prod"`}},
		{"tag in a later document of a list", "f.yaml", "- " + strings.TrimSuffix(res, "\n") + "\n- name: d\n  constraints: !a=b\n  " + strings.Replace(res, "name: c", "name: d", 1), []string{
			`f.yaml:3:16: document 2: constraints: YAML reads !a=b as a tag, not as text, so the constraint would be dropped and the variant would match every client; quote a value that starts with "!": constraints: "!a=b"`}},
		{"tag on another field", "f.yaml", cl + "name: !x c\n", []string{
			`f.yaml:2:7: document 1: name: YAML reads !x as a tag, not as text, so only "c" would be kept; quote a value that starts with "!": name: "!x c"`}},
		{"verbatim tag", "f.yaml", cl + "name: !<c> d\n", []string{
			`f.yaml:2:7: document 1: name: YAML reads !<c> as a tag, not as text, so only "d" would be kept; quote a value that starts with "!": name: "!<c> d"`}},
		{"tag in a list", "f.yaml", "\"@type\": envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: v\n  domains:\n  - !x\n", []string{
			`f.yaml:6:5: document 1: virtual_hosts[0].domains[0]: YAML reads !x as a tag, not as text, so the value would be dropped; quote a value that starts with "!": - "!x"`}},
		{"mixed form is a YAML error", "f.yaml", "name: c\nconstraints: !exists(version) && env=prod # TP2\n" + res, []string{
			`f.yaml:2: document 1: invalid YAML: yaml: line 2: did not find expected alphabetic or numeric character (YAML reads !exists(version) on line 2 as a tag; quote a value that starts with "!": constraints: "!exists(version) && env=prod")`}},
		{"null constraints", "f.yaml", "name: c\nconstraints: null\n" + res, []string{
			`f.yaml:2:14: document 1: constraints: null: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},
		{"tilde constraints", "f.yaml", "name: c\nconstraints: ~\n" + res, []string{
			`f.yaml:2:14: document 1: constraints: null: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},
		{"bare constraints key", "f.yaml", "name: c\nconstraints:\n" + res, []string{
			`f.yaml:2:13: document 1: constraints: null: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},
		{"empty constraints", "f.yaml", "name: c\nconstraints: \" \"\n" + res, []string{
			`f.yaml:2:14: document 1: constraints: empty: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},
		{"JSON null constraints", "f.json", `{"name": "c", "constraints": null, ` + jsonRes + "}", []string{
			`f.json:1:30: document 1: constraints: null: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},
		{"JSON array null constraints", "-", "[\n" + `{"name": "c", "constraints": "env=a", ` + jsonRes + "},\n" + `{"name": "c", "constraints": null, ` + jsonRes + "}\n]", []string{
			`-:3:30: document 2: constraints: null: leave constraints out for a variant that matches every client; a constraint that starts with "!" must be quoted, or YAML reads it as a tag: constraints: "!exists(version)"`}},

		// 3. Duplicate keys: decoders keep the last one silently.
		{"duplicate YAML key", "f.yaml", cl + "name: a\nname: b\n", []string{
			`f.yaml:3:1: document 1: name: duplicate key "name" (first on line 2): a key may appear only once in a mapping (otherwise the last would silently win)`}},
		{"duplicate nested YAML key", "f.yaml", "---\nname: c\nresource:\n  " + cl + "  name: c\n  name: d\n", []string{
			`f.yaml:6:3: document 1: resource.name: duplicate key "name" (first on line 5): a key may appear only once in a mapping (otherwise the last would silently win)`}},
		{"duplicate JSON key", "f.json", "{\"@type\": \"envoy.config.cluster.v3.Cluster\",\n \"name\": \"a\",\n \"name\": \"b\"}", []string{
			`f.json:3:2: document 1: name: duplicate key "name" (first on line 2): a key may appear only once in an object (otherwise the last would silently win)`}},
		{"duplicate nested JSON key", "-", "[{\"@type\": \"envoy.config.cluster.v3.Cluster\", \"name\": \"a\"},\n {\"name\": \"c\", \"resource\": {\"@type\": \"envoy.config.cluster.v3.Cluster\",\n  \"name\": \"c\", \"lb_policy\": \"RING_HASH\", \"lb_policy\": \"MAGLEV\"}}]", []string{
			`-:3:42: document 2: resource.lb_policy: duplicate key "lb_policy" (first on line 3): a key may appear only once in an object (otherwise the last would silently win)`}},

		// 4. JSON that does not parse is reported as JSON, where it broke.
		{"truncated JSON file", "f.json", "{\"@type\": \"envoy.config.cluster.v3.Cluster\",\n \"name\": \"c\"\n", []string{
			`f.json:2:13: document 1: invalid JSON: unexpected end of input`}},
		{"malformed JSON array", "f.yaml", "[\n {\"@type\": \"envoy.config.cluster.v3.Cluster\", \"name\": \"a\"},\n {\"@type\": \"envoy.config.cluster.v3.Cluster\", \"name\" \"b\"}\n]\n", []string{
			`f.yaml:3:54: invalid JSON: invalid character '"' after object key`}},
		{"JSON file that is no JSON", "f.json", "name: [\n", []string{
			`f.json:1:1: invalid JSON: unexpected 'n': a JSON source holds one object, or an array of objects`}},

		// 5. The reserved prefix, whatever its case.
		{"reserved context param upper case", "f.yaml", cl + "name: xdstp://a/envoy.config.cluster.v3.Cluster/x?XDS.node.id=1\n", []string{
			`f.yaml:2:7: document 1: name: xdstp name "xdstp://a/envoy.config.cluster.v3.Cluster/x?XDS.node.id=1": context parameter "XDS.node.id" is in the reserved xds. namespace (only computed xds.resource.* attributes may be authored)`}},
		{"reserved context param mixed case", "f.yaml", cl + "name: xdstp://a/envoy.config.cluster.v3.Cluster/x?Xds.shard=1\n", []string{
			`f.yaml:2:7: document 1: name: xdstp name "xdstp://a/envoy.config.cluster.v3.Cluster/x?Xds.shard=1": context parameter "Xds.shard" is in the reserved xds. namespace (only computed xds.resource.* attributes may be authored)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Decode(tc.source, []byte(tc.src))
			var l ErrorList
			if !errors.As(err, &l) {
				t.Fatalf("error %v (%T) is not an ErrorList; decoded %d documents", err, err, len(docs))
			}
			got := make([]string, len(l))
			for i, e := range l {
				got[i] = e.Error()
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A constraint that starts with "!" is fine once quoted, in YAML and JSON.
func TestDecodeQuotedNegation(t *testing.T) {
	for name, src := range map[string]string{
		"yaml double quotes": "name: c\nconstraints: \"!exists(version)\"\nresource: {\"@type\": envoy.config.cluster.v3.Cluster}\n",
		"yaml single quotes": "name: c\nconstraints: '!exists(version)'\nresource: {\"@type\": envoy.config.cluster.v3.Cluster}\n",
		"yaml standard tag":  "name: c\nconstraints: !!str '!exists(version)'\nresource: {\"@type\": envoy.config.cluster.v3.Cluster}\n",
		"json":               `{"name": "c", "constraints": "!exists(version)", "resource": {"@type": "envoy.config.cluster.v3.Cluster"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			docs, err := Decode("f.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if got := docs[0].Variant.Constraints; len(docs) != 1 || !got.Equal(constraint.MustParse("!exists(version)")) {
				t.Errorf("constraints = %q, want !exists(version)", got)
			}
		})
	}
}

// A wrapper's ttl becomes Resource.ttl (docs/protocol.md §2.7): a duration of at
// least MinTTL, not on on-demand virtual hosts; a changed TTL is changed
// content.
func TestDecodeTTL(t *testing.T) {
	const cl = "resource: {\"@type\": envoy.config.cluster.v3.Cluster, name: c}\n"
	ds, err := Decode("t.yaml", []byte("ttl: 30s\n"+cl))
	if err != nil {
		t.Fatal(err)
	}
	v := ds[0].Variant
	if v.TTL != 30*time.Second {
		t.Fatalf("TTL = %s", v.TTL)
	}
	plain, err := Decode("t.yaml", []byte(cl))
	if err != nil {
		t.Fatal(err)
	}
	if v.SameContent(plain[0].Variant) {
		t.Error("a TTL is part of the content")
	}
	for _, tc := range []struct{ src, want string }{
		{"ttl: soon\n" + cl, `t.yaml:1:6: document 1: ttl: must be a duration such as "30s"`},
		{"ttl: 30\n" + cl, `t.yaml:1:6: document 1: ttl: must be a duration`},
		{"ttl: 10ms\n" + cl, "ttl: 10ms is shorter than the minimum 100ms"},
		{"ttl: 1m\nresource: {\"@type\": envoy.config.route.v3.VirtualHost, name: rc/v, domains: [a]}\n", "ttl: on-demand virtual hosts take no TTL"},
	} {
		_, err := Decode("t.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

// A source named *.json is strict JSON: what YAML's flow style would also
// read (single quotes, a trailing comma, unquoted keys) is an error with
// its line and column. A blank one holds no documents, as a blank YAML
// file.
func TestDecodeJSONIsStrict(t *testing.T) {
	const cl = `"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster"`
	for _, c := range []struct{ src, want string }{
		{"{'@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', \"name\": \"a\"}", `a.json:1:2: document 1: invalid JSON: invalid character '\'' looking for beginning of object key string`},
		{"[\n {" + cl + `, "name": "a",}` + "\n]", `a.json:2:79: document 1: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"{" + cl + ", name: a}", `a.json:1:66: document 1: invalid JSON: invalid character 'n' looking for beginning of object key string`},
	} {
		_, err := Decode("a.json", []byte(c.src))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.src, err, c.want)
		}
		if _, err := Decode("a.yaml", []byte(c.src)); err != nil {
			t.Errorf("%s as YAML: %v", c.src, err)
		}
		if _, err := DecodeJSON("request", []byte(c.src)); err == nil || !strings.Contains(err.Error(), "request:") {
			t.Errorf("%s as a JSON request: %v", c.src, err)
		}
	}
	if docs, err := Decode("a.json", []byte(" \n")); len(docs) != 0 || err != nil {
		t.Errorf("blank: %v %v", docs, err)
	}
}

// SetCheck reports, in the order the documents came, a variant defined
// twice (even as a resource's third variant) and each resource whose
// variants break TP2's rules, and nothing about resources that keep them.
func TestSetCheckAcrossResources(t *testing.T) {
	v := func(name, cons string) string {
		return "name: " + name + "\nconstraints: " + cons + "\nresource: {\"@type\": envoy.config.cluster.v3.Cluster, name: " + name + "}\n---\n"
	}
	src := v("b", "env=prod || env=qa") + v("ok", "env=prod") + v("a", "env=prod") + v("ok", "env=test") +
		v("b", "env=qa") + v("a", "env=test") + v("a", "env=qa") + v("a", "env=test") + v("c", "env=prod")
	var s SetCheck
	if err := DecodeReader("f.yaml", strings.NewReader(src), Auto, func(d *Document) error { s.Add(d); return nil }); err != nil {
		t.Fatal(err)
	}
	errs := s.Errs()
	var got []string
	for _, e := range errs {
		got = append(got, fmt.Sprintf("%d %q", e.Index, e.Msg))
	}
	if len(errs) != 2 || errs[0].Index != 8 || !strings.Contains(errs[0].Msg, "defined twice; first in f.yaml") || !strings.Contains(errs[0].Msg, "document 6") ||
		errs[1].Index != 1 || !strings.Contains(errs[1].Msg, "variants of envoy.config.cluster.v3.Cluster b") || !strings.Contains(errs[1].Msg, "env=qa") {
		t.Errorf("got\n%s", strings.Join(got, "\n"))
	}
}
