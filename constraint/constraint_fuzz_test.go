package constraint

import (
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts prints canonically
// to text that parses back to an Equal value with identical text, and
// survives the proto round trip.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "true", "false", "!true", "a=1", "env=prod && version!=v1",
		"a=1 || b=2 && c=3", "(a=1 || b=2) && c=3", "!(a=1 && (b=2 || !exists(c)))",
		`path="/a b" && "weird key"=x && k=""`, `a="\xff\u00e9"`, "true=1", "exists(exists)",
		"env=prod &&", "exists(", `a="`, "!!!!!a=1", "((a=1))", "a=1,b=2", "{a=1}",
		strings.Repeat("a=1 || b=1 && (", 20) + "c=1" + strings.Repeat(")", 20),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse(s)
		if err != nil {
			if c.Key() != "" {
				t.Fatalf("Parse(%q) returned a value with its error", s)
			}
			return
		}
		out := c.String()
		if len(out) > MaxTextLen {
			return // quoting can lengthen text past the input limit
		}
		c2, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not re-parse: %v", s, out, err)
		}
		if !c2.Equal(c) || c2.String() != out {
			t.Fatalf("Parse(%q) = %q, re-parsed as %q", s, out, c2)
		}
		c3, err := FromProto(c.Proto())
		if err != nil || !c3.Equal(c) {
			t.Fatalf("proto round trip of %q gave %q, %v", out, c3, err)
		}
		// Params text round-trips for the keys and values seen here too.
		p := Params{}
		for _, k := range c.Keys() {
			p[k] = k + "\x00\""
		}
		p2, err := ParseParams(p.String())
		if err != nil || p2.Key() != p.Key() {
			t.Fatalf("params round trip of %v gave %v, %v", p, p2, err)
		}
	})
}

// FuzzValidate: for two random expressions over two keys, the overlap
// verdict of Overlap and ValidateVariants equals brute-force enumeration,
// and any witness matches both.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{9, 9, 9, 1, 1, 1, 5, 5, 5, 0, 0, 0, 7, 3, 2})
	f.Add([]byte("arbitrary seed bytes for the expression builder"))
	keys := []string{"a", "b"}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &byteGen{data: data}
		x := g.expr(keys, 4)
		y := g.expr(keys, 4)
		checkOverlap(t, x, y, keys)
	})
}

// byteGen turns fuzz input into expressions; running out of bytes yields
// zeros, which build leaves, so every input terminates.
type byteGen struct {
	data []byte
	i    int
}

func (g *byteGen) next() int {
	if g.i >= len(g.data) {
		return 0
	}
	g.i++
	return int(g.data[g.i-1])
}

func (g *byteGen) expr(keys []string, depth int) Constraints {
	b := g.next()
	k := keys[b>>4%len(keys)]
	switch n := b % 8; {
	case depth == 0 || n < 3:
		return Value(k, string(rune('1'+(b>>5)%3)))
	case n == 3:
		return Exists(k)
	case n == 4:
		return Not(g.expr(keys, depth-1))
	default:
		cs := make([]Constraints, g.next()%4)
		for i := range cs {
			cs[i] = g.expr(keys, depth-1)
		}
		if n < 7 {
			return And(cs...)
		}
		return Or(cs...)
	}
}
