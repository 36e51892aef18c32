package policy_test

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/policy"
	"github.com/xdsd/xdsd/resource"
)

const prodTest = `
rules:
- clients: ["spiffe://example.org/ns/prod/*"]
  types: [lds, rds, cds, eds]
  names: ["*"]
  params: {env: [prod]}
- clients: ["spiffe://example.org/ns/test/*"]
  types: [cds]
  names: ["test-*", "xdstp://test.example/*"]
  params: {env: [test, "dev-*"]}
- types: [type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment]
  names: [public]
`

func mustParse(t *testing.T, s string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(s), "policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllow(t *testing.T) {
	p := mustParse(t, prodTest)
	const prod, test = "spiffe://example.org/ns/prod/sa/web", "spiffe://example.org/ns/test/sa/web"
	for _, tc := range []struct {
		who, typ, name, want string
	}{
		{prod, resource.ClusterURL, "anything", ""},
		{prod, resource.SecretURL, "key", policy.ReasonType},
		{test, resource.ClusterURL, "test-a", ""},
		{test, resource.ClusterURL, "xdstp://test.example/envoy.config.cluster.v3.Cluster/a", ""},
		{test, resource.ClusterURL, "prod-a", policy.ReasonName},
		{test, resource.ListenerURL, "test-a", policy.ReasonType},
		{"spiffe://other.org/x", resource.ClusterURL, "test-a", policy.ReasonType}, // only the anonymous-capable EDS rule covers it
		{"", resource.EndpointURL, "public", ""},
		{"", resource.EndpointURL, "private", policy.ReasonName},
		{"", resource.ClusterURL, "x", policy.ReasonType},
	} {
		if got := p.Allow(tc.who, tc.typ, tc.name); got != tc.want {
			t.Errorf("Allow(%q, %s, %q) = %q, want %q", tc.who, tc.typ, tc.name, got, tc.want)
		}
	}
	only := mustParse(t, "rules:\n- clients: [\"spiffe://a/*\"]\n")
	if got := only.Allow("spiffe://b/x", resource.ClusterURL, "c"); got != policy.ReasonClient {
		t.Errorf("uncovered identity: %q, want %q", got, policy.ReasonClient)
	}
	if got := only.Allow("", resource.ClusterURL, "c"); got != policy.ReasonClient {
		t.Errorf("anonymous client under a clients rule: %q, want %q", got, policy.ReasonClient)
	}
}

func TestClaim(t *testing.T) {
	p := mustParse(t, prodTest)
	const prod, test = "spiffe://example.org/ns/prod/sa/web", "spiffe://example.org/ns/test/sa/web"
	for _, tc := range []struct {
		who    string
		params map[string]string
		bad    string // the parameter named, "" if allowed
	}{
		{prod, map[string]string{"env": "prod", "region": "eu"}, ""},
		{prod, map[string]string{"env": "test"}, "env"},
		{test, map[string]string{"env": "dev-7"}, ""},
		{test, map[string]string{"env": "prod"}, "env"},
		{"", map[string]string{"env": "prod"}, ""}, // the anonymous rule names no params: any
		{test, nil, ""},
	} {
		err := p.Claim(tc.who, tc.params)
		if (err == nil) != (tc.bad == "") || (err != nil && !strings.Contains(err.Error(), tc.bad+"=")) {
			t.Errorf("Claim(%q, %v) = %v, want refusal naming %q", tc.who, tc.params, err, tc.bad)
		}
	}
	only := mustParse(t, "rules:\n- clients: [\"spiffe://a/*\"]\n")
	if err := only.Claim("spiffe://b/x", map[string]string{"env": "prod"}); err == nil {
		t.Error("an identity no rule covers may claim a parameter")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty policy"},
		{"rules: 3", "policy.yaml:1:8: rules: want a list"},
		{"rulez: []", "policy.yaml:1:1: rulez: unknown field"},
		{"rules:\n- types: [nope]", `policy.yaml:2:11: rules[0].types[0]: unknown resource type "nope"`},
		{"rules:\n- names: []", "policy.yaml:2:10: rules[0].names: empty list"},
		{"rules:\n- clients: x", "policy.yaml:2:12: rules[0].clients: want a list"},
		{"rules:\n- params: {env: prod}", "policy.yaml:2:17: rules[0].params.env: want a list"},
		{"rules:\n- verbs: [get]", "policy.yaml:2:3: rules[0].verbs: unknown field"},
		{"rules: [", "policy.yaml: yaml"},
	} {
		_, err := policy.Parse([]byte(tc.in), "policy.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestGlob(t *testing.T) {
	p := func(glob string) *policy.Policy {
		return mustParse(t, "rules:\n- names: [\""+glob+"\"]\n")
	}
	for _, tc := range []struct {
		glob, name string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything/at/all", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*c", "abc", true},
		{"a*c", "ac", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"xdstp://a/*/x", "xdstp://a/t/y/x", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**", "x", true},
		{"a*a*a*a*a*a*b", strings.Repeat("a", 200), false},
	} {
		got := p(tc.glob).Allow("", resource.ClusterURL, tc.name) == ""
		if got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}

// BenchmarkAllow is the check a stream with a policy makes for each
// resource it could be sent.
func BenchmarkAllow(b *testing.B) {
	p, err := policy.Parse([]byte(prodTest), "policy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	const test = "spiffe://example.org/ns/test/sa/web"
	for b.Loop() {
		p.Allow(test, resource.ClusterURL, "xdstp://test.example/envoy.config.cluster.v3.Cluster/service-1234")
	}
}

// Admin rules give certificates admin roles, and nothing over xDS (issue
// 27 point 7).
func TestAdminRoles(t *testing.T) {
	p := mustParse(t, `rules:
- clients: ["spiffe://example.org/ns/ops/*"]
  admin: write
- clients: ["spiffe://example.org/ns/ops/sa/viewer", "spiffe://example.org/ns/dash/*"]
  admin: read
- clients: ["spiffe://example.org/ns/test/*"]
  types: [cds]
`)
	if !p.HasAdminRoles() || mustParse(t, prodTest).HasAdminRoles() {
		t.Errorf("HasAdminRoles wrong")
	}
	for who, want := range map[string]string{
		"spiffe://example.org/ns/ops/sa/viewer": policy.AdminWrite, // the highest role
		"spiffe://example.org/ns/dash/sa/x":     policy.AdminRead,
		"spiffe://example.org/ns/test/sa/web":   "",
		"":                                      "",
	} {
		if got := p.Admin(who); got != want {
			t.Errorf("Admin(%q) = %q, want %q", who, got, want)
		}
	}
	// An admin rule grants nothing over xDS, nor lets its clients claim.
	if got := p.Allow("spiffe://example.org/ns/ops/sa/a", resource.ClusterURL, "x"); got != policy.ReasonClient {
		t.Errorf("an admin identity over xDS: %q, want %q", got, policy.ReasonClient)
	}
	if err := p.Claim("spiffe://example.org/ns/ops/sa/a", map[string]string{"env": "prod"}); err == nil {
		t.Errorf("an admin identity may claim parameters")
	}
	for doc, want := range map[string]string{
		"rules:\n- admin: write\n":                                   "rules[0]: an admin rule needs \"clients\"",
		"rules:\n- clients: [a]\n  admin: all\n":                     "rules[0].admin: want read or write",
		"rules:\n- clients: [a]\n  admin: write\n  names: [\"*\"]\n": "grants the admin API only",
		"rules:\n- clients: [a]\n  types: [cds]\n  admin: read\n":    "grants the admin API only",
		"rules:\n- clients: [a]\n  admin: [write]\n":                 "rules[0].admin: want read or write",
	} {
		if _, err := policy.Parse([]byte(doc), "policy.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}
