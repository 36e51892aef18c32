package constraint

import (
	"testing"
)

var fourVariants = []string{
	"env!=prod && version!=v1",
	"env=prod && version!=v1",
	"env!=prod && version=v1",
	"env=prod && version=v1",
}

// BenchmarkMatch selects among TP2's four variants for a client sending five
// keys, as a server does for every subscriber on every update.
func BenchmarkMatch(b *testing.B) {
	var cs []Constraints
	for _, s := range fourVariants {
		cs = append(cs, MustParse(s))
	}
	p := Params{"env": "canary", "version": "v1", "region": "eu-west", "zone": "b", "tier": "gold"}
	b.ReportAllocs()
	matched := 0
	for b.Loop() {
		for _, c := range cs {
			if c.Match(p) {
				matched++
			}
		}
	}
	if matched == 0 {
		b.Fatal("nothing matched")
	}
}

func BenchmarkParse(b *testing.B) {
	const s = `env=prod && (version=v1 || version=v2) && !exists(canary) && region!="eu west"`
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := Parse(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateVariants checks a valid set of eight variants over three
// keys, the work an apply does for one resource.
func BenchmarkValidateVariants(b *testing.B) {
	var vs []Variant
	for _, env := range []string{"env=prod", "env!=prod"} {
		for _, ver := range []string{"(version=v1 || version=v2)", "version!=v1 && version!=v2"} {
			for _, region := range []string{"region=eu", "!(region=eu)"} {
				s := env + " && " + ver + " && " + region
				vs = append(vs, Variant{ID: s, Constraints: MustParse(s)})
			}
		}
	}
	if len(vs) != 8 {
		b.Fatalf("%d variants", len(vs))
	}
	if err := ValidateVariants(vs); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateVariants(vs); err != nil {
			b.Fatal(err)
		}
	}
}
