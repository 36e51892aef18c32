package protojsonerr

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// forbidden are texts of other libraries' error messages that production
// code once matched, and must not again (issue 28): protojson's position
// and "proto:" prefix (with the no-break space protobuf-go puts there to
// stop exactly this), its "unable to resolve", the flag package's
// undefined flag, net/http's malformed response, encoding/json's
// unexpected end of input. Positions and causes come
// from structure: Explain, flag.FlagSet lookups, the bytes on the wire.
var forbidden = []string{
	"(line ",
	"proto:",
	"\u00a0",
	"unable to resolve",
	"provided but not defined",
	"malformed HTTP response",
	"unexpected end of JSON input",
}

// forbiddenWhole are prefixes of such messages, forbidden as a whole
// string (the module's own messages may use the words).
var forbiddenWhole = []string{"unexpected end", "unexpected EOF"}

// TestNoErrorTextParsing fails when a string literal of the module's
// production code (tests may quote these messages) holds one of them.
func TestNoErrorTextParsing(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		fset := token.NewFileSet()
		var s scanner.Scanner
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok != token.STRING {
				continue
			}
			text, err := strconv.Unquote(lit)
			if err != nil {
				text = lit
			}
			for _, f := range append(forbidden, forbiddenWhole...) {
				if strings.Contains(text, f) && (!slices.Contains(forbiddenWhole, f) || text == f) {
					rel, _ := filepath.Rel(root, fset.Position(pos).Filename)
					t.Errorf("%s:%d: the string %s holds %q, a piece of another library's error text: "+
						"read the cause from structure (protojsonerr.Explain, flag.FlagSet.Lookup, the bytes on the wire), not from the message",
						rel, fset.Position(pos).Line, lit, f)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files under %s", files, root)
	}
}
