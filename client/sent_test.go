package client

import (
	"testing"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §1.7, §1.8: which subscriptions the request a full-state
// response answers surely named. Requests are numbered from 1; a response
// holding a resource answers a request naming it.
func TestSentRequests(t *testing.T) {
	keys := func(names ...string) map[db.Key]bool {
		m := map[db.Key]bool{}
		for _, n := range names {
			m[db.Key{Name: n}] = true
		}
		return m
	}
	puts := func(names ...string) []*resource.Variant {
		var out []*resource.Variant
		for _, n := range names {
			out = append(out, &resource.Variant{Name: n})
		}
		return out
	}
	type step struct {
		request  []string // a request naming these, or
		response []string // a response holding these
		named    []string // then: surely named by what it answers
		not      []string // and: perhaps not
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a response to the first of two requests", []step{
			{request: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a"}, not: []string{"b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a", "b"}},
		}},
		{"an empty response answers the requests so far", []step{
			{request: []string{"a"}},
			{response: nil, named: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: nil, named: []string{"a"}, not: []string{"b"}},
		}},
		{"a name left out of a request and put back (a refetch)", []step{
			{request: []string{"a", "b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
			{request: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a"}, not: []string{"b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
		}},
		{"a name named before, dropped, named again", []step{
			{request: []string{"a"}},
			{request: nil},
			{request: []string{"a"}},
			{response: nil, not: []string{"a"}},
			{response: []string{"a"}, named: []string{"a"}},
		}},
		{"a response crossing a refetch and a new name", []step{
			{request: []string{"a", "m"}},
			{response: []string{"a", "m"}, named: []string{"a", "m"}},
			{request: []string{"a", "q"}},
			{request: []string{"a", "m", "q"}},
			{response: []string{"a", "m"}, named: []string{"a", "m"}, not: []string{"q"}},
			{response: []string{"a", "m", "q"}, named: []string{"a", "m", "q"}},
		}},
		{"the wildcard", []step{
			{request: []string{"*"}},
			{request: []string{"*", "b"}},
			{response: []string{"x"}, named: []string{"*"}, not: []string{"b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r sentRequests
			for i, s := range tc.steps {
				if s.response == nil && s.named == nil && s.not == nil {
					r.record(keys(s.request...))
					continue
				}
				r.answered(puts(s.response...))
				for _, n := range s.named {
					if !r.named(db.Key{Name: n}) {
						t.Errorf("step %d: %s not surely named", i, n)
					}
				}
				for _, n := range s.not {
					if r.named(db.Key{Name: n}) {
						t.Errorf("step %d: %s surely named", i, n)
					}
				}
			}
		})
	}
}
