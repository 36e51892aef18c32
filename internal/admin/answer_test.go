package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// writeApplyResult writes, a key at a time, what writeJSON writes of an
// ApplyResult, with every key or the first N of each list.
func TestWriteApplyResult(t *testing.T) {
	for _, c := range []struct {
		r  store.Result
		fs []DocError
	}{
		{store.Result{Rev: 7}, nil},
		{store.Result{Rev: 8, Puts: []resource.Key{
			{Type: resource.ClusterURL, Name: `a "quoted" <name>`},
			{Type: resource.RouteURL, Name: "r", Constraints: "env=prod && v=1"},
		}, Deletes: []resource.Key{{Type: resource.ClusterURL, Name: "gone"}}},
			[]DocError{{Source: "f.yaml", Line: 3, Message: "route r: cluster c-v2: no such cluster", Warning: true}}},
	} {
		for _, list := range []int{-1, 0, 1, 5} {
			got := httptest.NewRecorder()
			writeApplyResult(got, c.r, c.fs, list)
			want := httptest.NewRecorder()
			out := result(c.r)
			out.Findings = c.fs
			if list >= 0 {
				// ?list=N names at most N of each list, and counts them all.
				out.Changed, out.Deleted = out.Changed[:min(list, len(out.Changed))], out.Deleted[:min(list, len(out.Deleted))]
			}
			writeJSON(want, http.StatusOK, out)
			if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != "application/json" {
				t.Errorf("list %d: got\n%s\nwant\n%s", list, got.Body, want.Body)
			}
		}
	}
}

// writeResourceList writes, a resource at a time, what writeJSON writes
// of a ResourceList, empty or not, whatever the names hold.
func TestWriteResourceList(t *testing.T) {
	for _, vs := range [][]*resource.Variant{
		nil,
		{storetest.Cluster(`a "quoted" <name>`, "", "x")},
		{storetest.Route("r", "env=prod && v=1", "p"), storetest.Route("r", "", "d"), storetest.Cluster("c", "", "y")},
	} {
		got := httptest.NewRecorder()
		writeResourceList(got, 9, sortVariants(vs))
		want := httptest.NewRecorder()
		out := ResourceList{Revision: 9, Resources: []Resource{}}
		for _, v := range sortVariants(vs) {
			out.Resources = append(out.Resources, Render(v))
		}
		writeJSON(want, http.StatusOK, out)
		if got.Body.String() != want.Body.String() || got.Header().Get("Content-Type") != "application/json" {
			t.Errorf("got\n%s\nwant\n%s", got.Body, want.Body)
		}
	}
}
