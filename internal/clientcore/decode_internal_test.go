package clientcore

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// TP2: a variant whose constraints do not match the parameters it was
// subscribed with is rejected with a clear reason; a legacy subscription
// takes what the server chose.
func TestCheckRejectsMismatchedVariant(t *testing.T) {
	sub := func(params constraint.Params) *db.Sub {
		s := db.NewSub(resource.SecretURL, "s", params)
		s.Locator = params != nil
		return &s
	}
	subs := func(ss ...*db.Sub) map[db.Key]*db.Sub {
		m := map[db.Key]*db.Sub{}
		for _, s := range ss {
			m[s.Key] = s
		}
		return m
	}
	prod, test := constraint.Params{"env": "prod"}, constraint.Params{"env": "test"}
	for _, tc := range []struct {
		name    string
		subs    map[db.Key]*db.Sub
		cons    string
		wantErr string
	}{
		{"matching", subs(sub(prod)), "env=prod", ""},
		{"mismatch", subs(sub(prod)), "env=test",
			"s: variant [env=test] does not match the dynamic parameters it was subscribed with ({env=prod})"},
		{"one of two parameter sets", subs(sub(prod), sub(test)), "env=test", ""},
		{"legacy subscription", subs(sub(nil)), "env=test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ut := &upType{url: resource.SecretURL, subs: tc.subs, held: map[string]map[string]string{}}
			cons := constraint.MustParse(tc.cons)
			v := resource.NewVariant(resource.ForURL(resource.SecretURL), "s", cons, "1", "", nil)
			d := ut.checked(&received{items: []rcvd{{name: "s", cons: cons, v: v}}})
			got := strings.Join(d.errs, "; ")
			if got != tc.wantErr || (tc.wantErr == "") != (len(d.puts) == 1) {
				t.Fatalf("errs %q (%d accepted), want %q", got, len(d.puts), tc.wantErr)
			}
		})
	}
}
