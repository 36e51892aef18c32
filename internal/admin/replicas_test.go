package admin_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/fleet"
)

// Groups merge across replicas; one that does not answer is named in
// X-Xdsd-Incomplete, and the others' groups are still given.
func TestGroupsAcrossReplicas(t *testing.T) {
	mine := []fleet.Group{{Agent: fleet.Envoy, Params: map[string]string{"env": "prod"}, Count: 2, Nodes: []string{"a", "b"}}}
	theirs := []fleet.Group{{Agent: fleet.Envoy, Params: map[string]string{"env": "prod"}, Count: 3, Nodes: []string{"c"}}}
	quiet := slog.New(slog.DiscardHandler)
	other := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet,
		Groups: func(context.Context) ([]fleet.Group, error) { return theirs, nil },
		Replicas: func(context.Context) (map[string]string, error) {
			t.Error("a replica asked with local=true asked the others")
			return nil, nil
		}}))
	defer other.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	srv := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet,
		Groups: func(context.Context) ([]fleet.Group, error) { return mine, nil },
		Replicas: func(context.Context) (map[string]string, error) {
			return map[string]string{"b": other.URL, "dead": dead.URL}, nil
		}}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/groups")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l admin.GroupList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if len(l.Groups) != 1 || l.Groups[0].Count != 5 || strings.Join(l.Groups[0].Nodes, ",") != "a,b,c" {
		t.Errorf("merged groups: %+v", l.Groups)
	}
	if inc := resp.Header.Get("X-Xdsd-Incomplete"); !strings.Contains(inc, "dead") {
		t.Errorf("X-Xdsd-Incomplete: %q, want it to name the replica that did not answer", inc)
	}
}
