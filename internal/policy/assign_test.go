package policy_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/policy"
	"github.com/xdsd/xdsd/resource"
)

const assignPolicy = `rules:
- clients: ["spiffe://t/ns/test/*"]
  assign: {env: test}
- clients: ["spiffe://t/ns/test/*", "spiffe://t/ns/prod/*"]
  types: [rds]
- clients: ["spiffe://t/ns/prod/*"]
  assign: {env: prod, tier: gold}
  params: {region: [eu]}
- clients: ["spiffe://t/ns/ops/*"]
  csds: all
`

// Issue 27 point 3: what a rule assigns is the client's whatever it
// claims or omits; another value is refused, the same one accepted.
func TestAssigned(t *testing.T) {
	p := mustParse(t, assignPolicy)
	const test, prod, ops = "spiffe://t/ns/test/sa/a", "spiffe://t/ns/prod/sa/a", "spiffe://t/ns/ops/sa/a"
	for who, want := range map[string]map[string]string{
		test: {"env": "test"},
		prod: {"env": "prod", "tier": "gold"},
		ops:  nil,
		"":   nil,
	} {
		if got := p.Assigned(who); !maps.Equal(got, want) {
			t.Errorf("Assigned(%q) = %v, want %v", who, got, want)
		}
	}
	if err := p.Claim(test, map[string]string{"env": "test"}); err != nil {
		t.Errorf("claiming the assigned value: %v", err)
	}
	err := p.Claim(test, map[string]string{"env": "prod"})
	if err == nil || !strings.Contains(err.Error(), `the policy assigns spiffe://t/ns/test/sa/a env="test"`) {
		t.Errorf("claiming another value: %v", err)
	}
	if err := p.Claim(prod, map[string]string{"region": "us"}); err == nil {
		t.Error("params still restrict what is not assigned")
	}
	// A rule of clients and assign (or csds) alone allows no resources;
	// the rule naming rds allows rds.
	if got := p.Allow(test, resource.ClusterURL, "c"); got == "" {
		t.Error("an assign-only rule allowed a cluster")
	}
	if got := p.Allow(test, resource.RouteURL, "r"); got != "" {
		t.Errorf("rds rule: %q", got)
	}
	if got := p.Allow(ops, resource.RouteURL, "r"); got == "" {
		t.Error("a csds-only rule allowed a route")
	}
}

// Issue 27 point 6: csds: all is granted by the rules covering an
// identity, and to no one else.
func TestCSDSAll(t *testing.T) {
	p := mustParse(t, assignPolicy)
	if !p.CSDSAll("spiffe://t/ns/ops/sa/a") {
		t.Error("ops was granted csds: all")
	}
	for _, who := range []string{"", "spiffe://t/ns/test/sa/a", "spiffe://t/ns/opsx"} {
		if p.CSDSAll(who) {
			t.Errorf("%q sees every client", who)
		}
	}
	if mustParse(t, "rules:\n- csds: own\n").CSDSAll("") {
		t.Error("csds: own grants all")
	}
}

// Two rules that could cover one identity and assign different values to
// one key are refused when the policy loads, naming both rules; rules
// whose clients cannot overlap may.
func TestAssignConflicts(t *testing.T) {
	for _, tc := range []struct {
		a, b string // clients of the two rules ("" = omitted)
		want string // "" = no conflict, else part of the error
	}{
		{"", "", "every client"},
		{`["spiffe://t/a"]`, "", `the identities matching "spiffe://t/a"`},
		{`["spiffe://t/ns/test/*"]`, `["spiffe://t/ns/*/sa/web"]`, `both "spiffe://t/ns/test/*" and "spiffe://t/ns/*/sa/web"`},
		{`["*/x"]`, `["y/*"]`, `both "*/x" and "y/*"`},
		{`["spiffe://t/a"]`, `["spiffe://t/a"]`, "both"},
		{`["spiffe://t/ns/test/*"]`, `["spiffe://t/ns/prod/*"]`, ""},
		{`["a*b"]`, `["a*c"]`, ""},
		{`["*a"]`, `["*b"]`, ""},
		{`["x", "spiffe://t/a*"]`, `["spiffe://t/*z"]`, `both "spiffe://t/a*" and "spiffe://t/*z"`},
	} {
		rule := func(clients, env string) string {
			s := "- assign: {env: " + env + "}\n"
			if clients != "" {
				s += "  clients: " + clients + "\n"
			}
			return s
		}
		src := "rules:\n" + rule(tc.a, "test") + rule(tc.b, "prod")
		_, err := policy.Parse([]byte(src), "policy.yaml")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", src, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "rules[0] (policy.yaml:2)") || !strings.Contains(err.Error(), "rules[1] (policy.yaml:")):
			t.Errorf("%s: %v, want an error naming both rules and %s", src, err, tc.want)
		}
	}
	// The same value twice is no conflict.
	mustParse(t, "rules:\n- assign: {env: test}\n- assign: {env: test}\n")
}

func TestAssignParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"rules:\n- assign: [env]", "policy.yaml:2:11: rules[0].assign: want a mapping"},
		{"rules:\n- assign: {}", "rules[0].assign: empty"},
		{"rules:\n- assign: {env: [a, b]}", "rules[0].assign.env: want one value"},
		{"rules:\n- csds: everything", `rules[0].csds: want "all"`},
	} {
		_, err := policy.Parse([]byte(tc.in), "policy.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}
