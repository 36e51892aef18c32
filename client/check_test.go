package client

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// TP2: a variant whose constraints do not match the parameters it was
// subscribed with is rejected with a clear reason; a legacy subscription
// takes what the server chose.
func TestCheckRejectsMismatchedVariant(t *testing.T) {
	c := &Client{o: Options{}}
	ch := &channel{c: c}
	payload := &anypb.Any{TypeUrl: resource.SecretURL, Value: nil}
	for _, tc := range []struct {
		name    string
		subs    map[subKey]*upSub
		cons    string
		wantErr string
	}{
		{"matching", map[subKey]*upSub{{"s", "env=prod"}: {name: "s", params: constraint.Params{"env": "prod"}, pkey: "env=prod", tp2: true}}, "env=prod", ""},
		{"mismatch", map[subKey]*upSub{{"s", "env=prod"}: {name: "s", params: constraint.Params{"env": "prod"}, pkey: "env=prod", tp2: true}}, "env=test",
			"s: variant [env=test] does not match the dynamic parameters it was subscribed with ({env=prod})"},
		{"one of two parameter sets", map[subKey]*upSub{
			{"s", "env=prod"}: {name: "s", params: constraint.Params{"env": "prod"}, pkey: "env=prod", tp2: true},
			{"s", "env=test"}: {name: "s", params: constraint.Params{"env": "test"}, pkey: "env=test", tp2: true}}, "env=test", ""},
		{"legacy subscription", map[subKey]*upSub{{"s", ""}: {name: "s"}}, "env=test", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ut := &upType{url: resource.SecretURL, subs: tc.subs, held: map[string]map[string]string{}}
			d := &decoded{}
			v := ch.check(ut, d, "s", constraint.MustParse(tc.cons), "1", payload, false)
			got := strings.Join(d.errs, "; ")
			if got != tc.wantErr || (tc.wantErr == "") != (v != nil) {
				t.Fatalf("errs %q (variant %v), want %q", got, v != nil, tc.wantErr)
			}
		})
	}
}
