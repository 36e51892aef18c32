// Package apicheck holds the test that keeps the public API public: no
// exported identifier of a public package may mention a type from
// internal/ (docs/architecture.md §3), or a Go user could not name, build
// or implement what the API asks of them.
package apicheck

import (
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// public are the packages a Go user may import.
var public = []string{"name", "constraint", "resource", "resource/files", "client", "client/clientdata", "server", "relay"}

const module = "github.com/xdsd/xdsd/"

func TestPublicAPIMentionsNoInternalType(t *testing.T) {
	imp := exportImporter(t, public...)
	var problems []string
	for _, p := range public {
		pkg, err := imp.Import(module + p)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, internalMentions(pkg)...)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// The check itself sees an internal type where there is one.
func TestCheckFindsInternalTypes(t *testing.T) {
	internalPkg := types.NewPackage(module+"internal/x", "x")
	hidden := types.NewNamed(types.NewTypeName(token.NoPos, internalPkg, "Hidden", nil), types.NewStruct(nil, nil), nil)
	pub := types.NewPackage(module+"server", "server")
	field := types.NewField(token.NoPos, pub, "H", types.NewSlice(types.NewPointer(hidden)), false)
	pub.Scope().Insert(types.NewTypeName(token.NoPos, pub, "Options", types.NewStruct([]*types.Var{field}, nil)))
	if got := internalMentions(pub); len(got) != 1 || !strings.Contains(got[0], "x.Hidden") {
		t.Fatalf("internal type in an exported field: got %q", got)
	}
}

// exportImporter imports packages from the export data the go command
// builds, so that the check sees the API exactly as the compiler does.
func exportImporter(t *testing.T, pkgs ...string) types.Importer {
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Export"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

// internalMentions lists, for every exported identifier of pkg (and every
// exported field and method of its exported types), the internal types its
// declaration mentions.
func internalMentions(pkg *types.Package) []string {
	var out []string
	report := func(what string, t types.Type) {
		for _, n := range internalTypes(t, map[types.Type]bool{}) {
			out = append(out, fmt.Sprintf("%s.%s mentions %s", pkg.Name(), what, n))
		}
	}
	sc := pkg.Scope()
	for _, n := range sc.Names() {
		obj := sc.Lookup(n)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			report(n, obj.Type())
			continue
		}
		if tn.IsAlias() {
			report(n, obj.Type())
			continue
		}
		named, ok := obj.Type().(*types.Named)
		if !ok {
			report(n, obj.Type())
			continue
		}
		if tp := named.TypeParams(); tp != nil {
			for i := 0; i < tp.Len(); i++ {
				report(n+" type parameter", tp.At(i).Constraint())
			}
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for i := 0; i < u.NumFields(); i++ {
				if f := u.Field(i); f.Exported() {
					report(n+"."+f.Name(), f.Type())
				}
			}
		case *types.Interface:
			for i := 0; i < u.NumMethods(); i++ {
				if m := u.Method(i); m.Exported() {
					report(n+"."+m.Name(), m.Type())
				}
			}
		default:
			report(n, u)
		}
		for i := 0; i < named.NumMethods(); i++ {
			if m := named.Method(i); m.Exported() {
				report(n+"."+m.Name(), m.Type())
			}
		}
	}
	return out
}

// internalTypes walks t down to the named types it is made of, without
// entering their definitions (each public package is checked on its own;
// an internal type is reported where it is named).
func internalTypes(t types.Type, seen map[types.Type]bool) []string {
	if seen[t] {
		return nil
	}
	seen[t] = true
	var out []string
	walk := func(ts ...types.Type) {
		for _, x := range ts {
			out = append(out, internalTypes(x, seen)...)
		}
	}
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			out = append(out, p.Name()+"."+t.Obj().Name()+" ("+p.Path()+")")
		}
		if ta := t.TypeArgs(); ta != nil {
			for i := 0; i < ta.Len(); i++ {
				walk(ta.At(i))
			}
		}
	case *types.Alias:
		if p := t.Obj().Pkg(); p != nil && isInternal(p.Path()) {
			out = append(out, p.Name()+"."+t.Obj().Name()+" ("+p.Path()+")")
		}
		walk(types.Unalias(t))
	case *types.Pointer:
		walk(t.Elem())
	case *types.Slice:
		walk(t.Elem())
	case *types.Array:
		walk(t.Elem())
	case *types.Map:
		walk(t.Key(), t.Elem())
	case *types.Chan:
		walk(t.Elem())
	case *types.Signature:
		for i := 0; i < t.Params().Len(); i++ {
			walk(t.Params().At(i).Type())
		}
		for i := 0; i < t.Results().Len(); i++ {
			walk(t.Results().At(i).Type())
		}
	case *types.Struct:
		for i := 0; i < t.NumFields(); i++ {
			if f := t.Field(i); f.Exported() || f.Embedded() {
				walk(f.Type())
			}
		}
	case *types.Interface:
		for i := 0; i < t.NumEmbeddeds(); i++ {
			walk(t.EmbeddedType(i))
		}
		for i := 0; i < t.NumExplicitMethods(); i++ {
			walk(t.ExplicitMethod(i).Type())
		}
	case *types.Union:
		for i := 0; i < t.Len(); i++ {
			walk(t.Term(i).Type())
		}
	case *types.TypeParam:
		walk(t.Constraint())
	}
	return out
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") || strings.HasPrefix(path, "internal/")
}
