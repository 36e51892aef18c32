package client

import (
	"context"
	"testing"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/store/storetest"
	"github.com/xdsd/xdsd/resource"
)

// An answer about names nothing watches any more (one crossing their
// unsubscription on the wire) leaves no status behind, while the status
// of a watched name is kept.
func TestAnswerForUnwatchedNamesLeavesNoStatus(t *testing.T) {
	c := newVHDSClient(t, "127.0.0.1:1")
	cancel, err := c.Watch(context.Background(), resource.ClusterURL, "watched", func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	puts := []*resource.Variant{storetest.Cluster("watched", "", "1"), storetest.Cluster("late", "", "1")}
	c.state.Do(func() {
		ch, _ := c.route("watched")
		c.applied(ch, resource.ClusterURL, db.Update{}, &decoded{puts: puts, removed: []string{"gone"}, bad: map[string]string{"bad": "bad: invalid"}})
		for k, st := range c.status {
			if k.Name != "watched" {
				t.Errorf("status left for unwatched %s: %+v", k.Name, *st)
			}
		}
		if st := c.status[db.Key{Type: resource.ClusterURL, Name: "watched"}]; st == nil || !st.got {
			t.Errorf("status of the watched name: %+v", st)
		}
	})
}
