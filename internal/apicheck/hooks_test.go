package apicheck

import (
	"go/types"
	"os/exec"
	"strings"
	"testing"
)

// TestNoAnyHooks keeps packages from linking through a variable of
// interface type that one package sets and another type-asserts (as
// cachepolicy.NewCache once linked the relay to the client): the
// compiler cannot check such a link, so a changed signature panics at run
// time, and this package's check of the public API cannot see through it.
// A package that needs another's function imports it.
func TestNoAnyHooks(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{if .GoFiles}}{{.ImportPath}}{{end}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module))
	}
	imp := exportImporter(t, pkgs...)
	for _, p := range pkgs {
		pkg, err := imp.Import(module + p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range hookVars(pkg) {
			t.Errorf("%s.%s is a variable of interface type %s that other packages could set and assert: give it a real type, or call a function of the package that has one", p, n, pkg.Scope().Lookup(n).Type())
		}
	}
}

// The check finds a hook where there is one.
func TestCheckFindsAnyHooks(t *testing.T) {
	pkg := types.NewPackage(module+"internal/x", "x")
	pkg.Scope().Insert(types.NewVar(0, pkg, "NewCache", types.NewInterfaceType(nil, nil)))
	pkg.Scope().Insert(types.NewVar(0, pkg, "Limit", types.Typ[types.Int]))
	pkg.Scope().Insert(types.NewVar(0, pkg, "hidden", types.NewInterfaceType(nil, nil)))
	if got := hookVars(pkg); len(got) != 1 || got[0] != "NewCache" {
		t.Fatalf("hook vars: got %q, want [NewCache]", got)
	}
}

// hookVars lists pkg's exported package-level variables of an interface
// type with no methods (any): what a hook between packages is made of.
// Variables of an interface with methods (an io.Writer, say) are typed
// links the compiler checks.
func hookVars(pkg *types.Package) []string {
	var out []string
	sc := pkg.Scope()
	for _, n := range sc.Names() {
		v, ok := sc.Lookup(n).(*types.Var)
		if !ok || !v.Exported() {
			continue
		}
		if it, ok := v.Type().Underlying().(*types.Interface); ok && it.NumMethods() == 0 {
			out = append(out, n)
		}
	}
	return out
}
