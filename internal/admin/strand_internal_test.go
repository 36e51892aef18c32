package admin

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

// The guard asks the fleet index who subscribes only for a batch that
// could strand someone: one putting a constrained variant, or deleting
// one variant. A batch of unconstrained resources, or deleting resources
// outright, cannot, and costs no walk of their subscribers.
func TestStrandedAsksOnlyWhenItCould(t *testing.T) {
	ct := resource.ForURL(resource.ClusterURL)
	open := func(name string) *resource.Variant {
		return resource.NewVariant(ct, name, constraint.Constraints{}, "", "", nil)
	}
	env := func(name, v string) *resource.Variant {
		return resource.NewVariant(ct, name, constraint.Value("env", v), "", "", nil)
	}
	st := mem.New()
	defer st.Close()
	asked := 0
	a := &api{o: Options{Store: st, Concerned: func(context.Context, protocol.Changed) ([]protocol.StreamStatus, error) {
		asked++
		return nil, nil
	}}}
	for _, tc := range []struct {
		name string
		b    store.Batch
		asks bool
	}{
		{"unconstrained puts", store.Batch{Puts: []*resource.Variant{open("a"), open("b")}}, false},
		{"a constrained variant beside an unconstrained one", store.Batch{Puts: []*resource.Variant{env("a", "test"), open("a")}}, false},
		{"a whole delete", store.Batch{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "a", All: true}}}, false},
		{"a delete and an unconstrained put of the same", store.Batch{Puts: []*resource.Variant{open("a")},
			Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "a", Constraints: "env=test"}}}, false},
		{"constrained variants only", store.Batch{Puts: []*resource.Variant{open("a"), env("b", "test"), env("b", "prod")}}, true},
		{"one variant deleted", store.Batch{Deletes: []store.Delete{{Type: resource.ClusterURL, Name: "a", Constraints: "env=test"}}}, true},
	} {
		asked = 0
		if _, err := a.stranded(httptest.NewRequest("POST", "/v1/apply", nil), tc.b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := asked > 0; got != tc.asks {
			t.Errorf("%s: asked the fleet index %v, want %v", tc.name, got, tc.asks)
		}
	}
}
