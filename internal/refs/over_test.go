package refs

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/resource"
)

// Many variants naming one resource (every cluster of a mesh names one
// secret) are kept as a set, so that removing them one by one stays
// cheap; the resource is referenced until the last goes, and roots are
// found as before.
func TestManyReferrers(t *testing.T) {
	var s Set
	secret := Ref{Type: resource.SecretURL, Name: "cert"}
	var es []*Entry
	for i := range 3 * maxReferrerList {
		refs := []Ref{secret}
		if i%2 == 0 {
			refs = append(refs, secret) // named twice
		}
		e := &Entry{Type: resource.ClusterURL, Name: fmt.Sprintf("c%d", i), Refs: refs}
		es = append(es, e)
		s.Add(e)
	}
	s.Add(&Entry{Type: resource.SecretURL, Name: "cert"})
	g := group{resource.SecretURL, "cert"}
	isRoot := func() bool {
		for _, r := range s.rootsWhere(func(typeURL string, referenced bool) bool { return !referenced }) {
			if r == g {
				return true
			}
		}
		return false
	}
	if s.referrers[g].set == nil || isRoot() {
		t.Fatalf("%d referrers: a set %v, the secret a root %v; want a set, and not a root", len(es), s.referrers[g].set != nil, isRoot())
	}
	for i, e := range es {
		if isRoot() {
			t.Fatalf("the secret is a root with %d of its %d referrers left", len(es)-i, len(es))
		}
		s.Remove(e)
	}
	if _, ok := s.referrers[g]; ok || !isRoot() {
		t.Errorf("every referrer removed: still listed %v, the secret a root %v", ok, isRoot())
	}
	if s.Len() != 1 {
		t.Errorf("%d variants left, want 1", s.Len())
	}
}
