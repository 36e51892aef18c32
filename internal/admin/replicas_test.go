package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
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
	if inc := resp.Header.Get("X-Xdsd-Incomplete"); !strings.HasPrefix(inc, "dead: ") || !strings.Contains(inc, "connect") {
		t.Errorf("X-Xdsd-Incomplete: %q, want it to name the replica that did not answer, and why", inc)
	}
	if len(l.Unreachable) != 1 || l.Unreachable[0].Replica != "dead" || l.Unreachable[0].Error == "" {
		t.Errorf("unreachable_replicas: %+v, want the dead one with its error", l.Unreachable)
	}
}

// pager serves a list of clients as Options.Page does: a search by node
// id, and a window of the matches.
func pager(replica string, nodes ...string) func(context.Context, protocol.ClientQuery) (protocol.ClientPage, error) {
	return func(_ context.Context, q protocol.ClientQuery) (protocol.ClientPage, error) {
		var p protocol.ClientPage
		for _, n := range nodes {
			if !strings.Contains(n, q.Node) {
				continue
			}
			if p.Matched >= q.Offset && (q.Limit <= 0 || len(p.Clients) < q.Limit) {
				p.Clients = append(p.Clients, protocol.StreamStatus{NodeID: n, Replica: replica})
			}
			p.Matched++
		}
		return p, nil
	}
}

// The clients' pages span the replicas: this one's matches first, then
// each other's by name; a search and every window (within one replica,
// across two, past the end) list the same clients as one list would.
func TestClientPageAcrossReplicas(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	replica := func(name string, nodes ...string) string {
		s := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet, Page: pager(name, nodes...)}))
		t.Cleanup(s.Close)
		return s.URL
	}
	others := map[string]string{
		"c": replica("c", "prod-c1", "test-c2"),
		"b": replica("b", "prod-b1", "prod-b2", "test-b3", "prod-b4"),
	}
	srv := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet, Page: pager("a", "prod-a1", "test-a2", "prod-a3"),
		Replicas: func(context.Context) (map[string]string, error) { return others, nil }}))
	defer srv.Close()
	all := []string{"prod-a1", "test-a2", "prod-a3", "prod-b1", "prod-b2", "test-b3", "prod-b4", "prod-c1", "test-c2"}
	for _, node := range []string{"", "prod", "test", "nothing"} {
		var want []string
		for _, n := range all {
			if strings.Contains(n, node) {
				want = append(want, n)
			}
		}
		for offset := 0; offset <= len(want)+1; offset++ {
			for _, limit := range []int{1, 2, 3, 50} {
				resp, err := http.Get(srv.URL + "/v1/clients/page?" + url.Values{"node": {node}, "offset": {fmt.Sprint(offset)}, "limit": {fmt.Sprint(limit)}}.Encode())
				if err != nil {
					t.Fatal(err)
				}
				var p admin.ClientPage
				err = json.NewDecoder(resp.Body).Decode(&p)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range p.Clients {
					got = append(got, c.NodeID)
					if c.Replica != c.NodeID[len(c.NodeID)-2:len(c.NodeID)-1] {
						t.Errorf("%s listed as on replica %q", c.NodeID, c.Replica)
					}
				}
				w := want[min(offset, len(want)):min(offset+limit, len(want))]
				if strings.Join(got, ",") != strings.Join(w, ",") || p.Matched != len(want) || len(p.Unreachable) != 0 {
					t.Errorf("node=%q offset=%d limit=%d: %v of %d (%v), want %v of %d", node, offset, limit, got, p.Matched, p.Unreachable, w, len(want))
				}
			}
		}
	}
	resp, err := http.Get(srv.URL + "/v1/clients/page?limit=0")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "limit=0: want 1 to 1000") {
		t.Errorf("limit=0: %d %s", resp.StatusCode, body)
	}
}

// /v1/clients joins the replicas' lists: this one's first, then each
// other's by name, none decoded; an empty or null list adds nothing.
func TestClientsAcrossReplicas(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	replica := func(clients any) string {
		s := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet, Clients: func() any { return clients }}))
		t.Cleanup(s.Close)
		return s.URL
	}
	others := map[string]string{
		"c": replica([]protocol.StreamStatus{{NodeID: "c1", Replica: "c"}}),
		"b": replica([]protocol.StreamStatus{{NodeID: "b1", Replica: "b"}, {NodeID: "b2", Replica: "b"}}),
		"d": replica([]protocol.StreamStatus{}),
		"e": replica(nil),
	}
	for _, mine := range []any{[]protocol.StreamStatus{{NodeID: "a1", Replica: "a"}}, []protocol.StreamStatus{}, nil} {
		srv := httptest.NewServer(admin.Handler(admin.Options{Logger: quiet, Clients: func() any { return mine },
			Replicas: func(context.Context) (map[string]string, error) { return others, nil }}))
		resp, err := http.Get(srv.URL + "/v1/clients")
		if err != nil {
			t.Fatal(err)
		}
		var got []protocol.StreamStatus
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		srv.Close()
		if err != nil {
			t.Fatalf("mine %v: %v", mine, err)
		}
		var nodes []string
		for _, c := range got {
			nodes = append(nodes, c.NodeID)
		}
		want := "b1,b2,c1"
		if mine != nil && len(mine.([]protocol.StreamStatus)) > 0 {
			want = "a1," + want
		}
		if strings.Join(nodes, ",") != want {
			t.Errorf("mine %v: %v, want %s", mine, nodes, want)
		}
	}
}
