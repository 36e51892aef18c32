package canary

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/constraint"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"25%", "25%", ""},
		{"100%", "100%", ""},
		{"0%", "", "from 1% to 100%"},
		{"x%", "", "whole percentage"},
		{"node=edge-*", "node=edge-*", ""},
		{"node=", "", "needs a glob"},
		{"node=[", "", "malformed"},
		{"region=eu,env=prod", "env=prod,region=eu", ""},
		{"env", "", "not param=value"},
		{"env=a,env=b", "", "given twice"},
		{"", "", "empty"},
	} {
		s, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q): %v, want an error saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || s.String() != c.want {
			t.Errorf("Parse(%q) = %q, %v; want %q", c.in, s, err, c.want)
		}
	}
}

// A percentage chooses by node id alone, about as many as it says; no
// node id is never chosen; params and node globs match as documented.
func TestMatch(t *testing.T) {
	s, _ := Parse("25%")
	in := 0
	for i := range 1000 {
		id := fmt.Sprintf("node-%d", i)
		if s.Match(id, nil) != s.Match(id, constraint.Params{"env": "x"}) {
			t.Fatalf("%s: the choice depends on parameters", id)
		}
		if s.Match(id, nil) {
			in++
		}
	}
	if in < 200 || in > 300 {
		t.Errorf("25%% chose %d of 1000 node ids", in)
	}
	if s.Match("", nil) {
		t.Error("a stream without node id is in a 25% canary")
	}
	if all, _ := Parse("100%"); !all.Match("x", nil) || all.Match("", nil) {
		t.Error("100%: every node id, and still no empty one")
	}
	n, _ := Parse("node=edge-*")
	if !n.Match("edge-1", nil) || n.Match("core-1", nil) || n.Match("", nil) {
		t.Error("node=edge-*")
	}
	p, _ := Parse("env=prod,region=eu")
	if !p.Match("", constraint.Params{"env": "prod", "region": "eu", "x": "y"}) || p.Match("a", constraint.Params{"env": "prod"}) {
		t.Error("env=prod,region=eu")
	}
	if p.PerNode() || !s.PerNode() || !n.PerNode() {
		t.Error("PerNode")
	}
}
