package constraint_test

import (
	"fmt"

	"github.com/xdsd/xdsd/constraint"
)

// The four variants of TP2's example serve all nine env × version
// combinations, and a client that sends neither key.
func Example() {
	variants := []constraint.Variant{
		{ID: "base", Constraints: constraint.MustParse("env!=prod && version!=v1")},
		{ID: "prod", Constraints: constraint.MustParse("!(version=v1) && env=prod")},
		{ID: "v1", Constraints: constraint.MustParse("env!=prod && version=v1")},
		{ID: "prod+v1", Constraints: constraint.MustParse("env=prod && version=v1")},
	}
	fmt.Println(constraint.ValidateVariants(variants))
	for _, s := range []string{"env=prod, version=v2", "{version=v1}", ""} {
		p, _ := constraint.ParseParams(s)
		for _, v := range variants {
			if v.Constraints.Match(p) {
				fmt.Printf("%s gets %s (%s)\n", p, v.ID, v.Constraints)
			}
		}
	}
	// Output:
	// <nil>
	// {env=prod, version=v2} gets prod (env=prod && version!=v1)
	// {version=v1} gets v1 (env!=prod && version=v1)
	// {} gets base (env!=prod && version!=v1)
}

func ExampleValidateVariants() {
	err := constraint.ValidateVariants([]constraint.Variant{
		{ID: "a", Constraints: constraint.MustParse("env=prod || env=test")},
		{ID: "b", Constraints: constraint.MustParse("env=qa || env=test")},
	})
	fmt.Println(err)
	// Output: variants a and b overlap: both match {env=test}
}

func ExampleParse() {
	c, err := constraint.Parse(`b=2 && (a=1 || !exists(c)) && path!="/a b"`)
	fmt.Println(c, err)
	_, err = constraint.Parse("env=prod &&")
	fmt.Println(err)
	// Output:
	// (!exists(c) || a=1) && b=2 && path!="/a b" <nil>
	// constraints "env=prod &&": at byte 11: expected a constraint, found end of input
}
