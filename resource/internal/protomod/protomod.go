// Package protomod finds the protobuf messages a Go module of generated
// code defines, by reading its source: the packages that hold *.pb.go
// files, and the messages each file's embedded descriptor declares.
//
// The authoring format resolves the google.protobuf.Any values of a
// resource (typed_config and the like) through the global protobuf
// registry, so every message an author may name must be linked into the
// binary. resource/extensions_gen.go imports every package this package
// finds (go generate), and a test checks that every message it finds is
// registered, so a new release of the Envoy API module cannot add an
// extension xdsd silently refuses.
package protomod

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Modules are the modules whose messages the authoring format resolves:
// the Envoy API (every extension) and the CNCF xDS API (xds.type.v3 and
// udpa.type.v1 TypedStruct, matchers, xds.core.v3).
var Modules = []string{
	"github.com/envoyproxy/go-control-plane/envoy",
	"github.com/cncf/xds/go",
}

// Module is a module as `go list -m` describes it.
type Module struct {
	Path string
	Dir  string
}

// Find locates modules in the module cache of the module in dir, as its
// go.mod requires them.
func Find(dir string, paths ...string) ([]Module, error) {
	cmd := exec.Command("go", append([]string{"list", "-m", "-json"}, paths...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", strings.Join(paths, " "), err)
	}
	var mods []Module
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var m Module
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		if m.Dir == "" {
			return nil, fmt.Errorf("module %s is not downloaded (run go mod download)", m.Path)
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// isGenerated reports whether a file is protoc-gen-go output (not the
// gRPC, validate or vtproto companions, which declare no messages).
func isGenerated(name string) bool {
	if !strings.HasSuffix(name, ".pb.go") {
		return false
	}
	for _, s := range []string{"_grpc.pb.go", ".pb.validate.go", "_vtproto.pb.go"} {
		if strings.HasSuffix(name, s) {
			return false
		}
	}
	return true
}

// Package is one Go package of generated protobuf code.
type Package struct {
	ImportPath string
	Dir        string
	Files      []string // the *.pb.go files
}

// Packages lists the packages of m that hold generated protobuf code,
// sorted by import path.
func Packages(m Module) ([]Package, error) {
	byDir := map[string]*Package{}
	err := filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isGenerated(d.Name()) {
			return nil
		}
		dir := filepath.Dir(p)
		pkg := byDir[dir]
		if pkg == nil {
			rel, err := filepath.Rel(m.Dir, dir)
			if err != nil {
				return err
			}
			pkg = &Package{ImportPath: m.Path + "/" + filepath.ToSlash(rel), Dir: dir}
			if rel == "." {
				pkg.ImportPath = m.Path
			}
			byDir[dir] = pkg
		}
		pkg.Files = append(pkg.Files, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Package, 0, len(byDir))
	for _, p := range byDir {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ImportPath < out[j].ImportPath })
	return out, nil
}

// Messages lists the full names of the messages a generated file declares,
// nested ones included and map entries (which have no Go type) excluded,
// read from the file descriptor protoc-gen-go embeds in it.
func Messages(file string) ([]string, error) {
	raw, err := rawDescriptor(file)
	if err != nil {
		return nil, err
	}
	var fd descriptorpb.FileDescriptorProto
	if err := proto.Unmarshal(raw, &fd); err != nil {
		return nil, fmt.Errorf("%s: embedded descriptor: %w", file, err)
	}
	var out []string
	var walk func(prefix string, ms []*descriptorpb.DescriptorProto)
	walk = func(prefix string, ms []*descriptorpb.DescriptorProto) {
		for _, m := range ms {
			if m.GetOptions().GetMapEntry() {
				continue
			}
			n := prefix + "." + m.GetName()
			out = append(out, n)
			walk(n, m.GetNestedType())
		}
	}
	walk(fd.GetPackage(), fd.GetMessageType())
	return out, nil
}

// rawDescriptor finds the file_*_rawDesc declaration of a generated file
// and evaluates it: a concatenation of string literals (protoc-gen-go
// since v1.36) or a byte slice literal (before).
func rawDescriptor(file string) ([]byte, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 ||
				!strings.HasPrefix(vs.Names[0].Name, "file_") || !strings.HasSuffix(vs.Names[0].Name, "_rawDesc") {
				continue
			}
			return evalBytes(vs.Values[0])
		}
	}
	return nil, fmt.Errorf("%s: no file_*_rawDesc declaration", file)
}

func evalBytes(e ast.Expr) ([]byte, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return nil, fmt.Errorf("unexpected literal %s", e.Value)
		}
		s, err := strconv.Unquote(e.Value)
		return []byte(s), err
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return nil, fmt.Errorf("unexpected operator %s", e.Op)
		}
		a, err := evalBytes(e.X)
		if err != nil {
			return nil, err
		}
		b, err := evalBytes(e.Y)
		return append(a, b...), err
	case *ast.ParenExpr:
		return evalBytes(e.X)
	case *ast.CompositeLit:
		out := make([]byte, 0, len(e.Elts))
		for _, el := range e.Elts {
			lit, ok := el.(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				return nil, fmt.Errorf("unexpected byte slice element")
			}
			n, err := strconv.ParseUint(lit.Value, 0, 8)
			if err != nil {
				return nil, err
			}
			out = append(out, byte(n))
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected expression %T", e)
}

// Source is the Go source of resource/extensions_gen.go for the packages:
// a blank import of each.
func Source(pkgs []Package) []byte {
	var b strings.Builder
	b.WriteString("// Code generated by go run ./internal/protomod/gen; DO NOT EDIT.\n\n")
	b.WriteString("package resource\n\n")
	b.WriteString("// Every package of the Envoy and CNCF xDS API modules that defines\n")
	b.WriteString("// protobuf messages, so that every extension an author may name in a\n")
	b.WriteString("// typed_config resolves (internal/protomod says why).\n")
	b.WriteString("import (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&b, "\t_ %q\n", p.ImportPath)
	}
	b.WriteString(")\n")
	return []byte(b.String())
}

// All lists the packages of every module in Modules, as required by the
// module in dir.
func All(dir string) ([]Package, error) {
	mods, err := Find(dir, Modules...)
	if err != nil {
		return nil, err
	}
	var out []Package
	for _, m := range mods {
		ps, err := Packages(m)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ImportPath < out[j].ImportPath })
	return out, nil
}
