package clientcore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// An answer about names nothing watches any more (one crossing their
// unsubscription on the wire) leaves no status behind, while the status
// of a watched name is kept.
func TestAnswerForUnwatchedNamesLeavesNoStatus(t *testing.T) {
	c := newVHDSClient(t, "127.0.0.1:1")
	cancel, err := c.Watch(context.Background(), resource.ClusterURL, "watched", func(clientdata.Event) {})
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

// Cancelling a glob or wildcard watch leaves nothing of its members behind:
// not in what the channel holds (and would declare on reconnection), not in
// the client's status.
func TestCollectionCancelLeavesNoMembers(t *testing.T) {
	o := testorigin.Start(t)
	lis := "xdstp://a/envoy.config.listener.v3.Listener/"
	o.Apply(fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener\nname: %q\n---\n", lis+"g/one") +
		"\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c1\n")
	c := startClient(t, fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}]}],"authorities":{"a":{}}}`, o.Addr), clientdata.Options{})
	for _, w := range []struct{ typ, name, member string }{
		{resource.ListenerURL, lis + "g/*", lis + "g/one"},
		{resource.ClusterURL, "*", "c1"},
	} {
		got := make(chan clientdata.Event, 10)
		cancel, err := c.Watch(t.Context(), w.typ, w.name, func(e clientdata.Event) { got <- e })
		if err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-got:
			if e.Kind != clientdata.Updated || e.Name != w.member {
				t.Fatalf("%s: %v %s", w.name, e.Kind, e.Name)
			}
		case <-time.After(testutil.Wait):
			t.Fatalf("%s: no event", w.name)
		}
		<-cancel()
		c.state.Do(func() {
			if st := c.status[db.Key{Type: w.typ, Name: w.member}]; st != nil {
				t.Errorf("%s: status of member %s kept: %+v", w.name, w.member, *st)
			}
			for _, ch := range c.channels {
				if ty := ch.types[w.typ]; ty != nil && ty.held[w.member] != nil {
					t.Errorf("%s: member %s still held: %v", w.name, w.member, ty.held[w.member])
				}
			}
		})
	}
}

// A watch redirected into an authority the bootstrap lacks leaves no
// status behind once cancelled.
func TestRedirectToUnknownAuthorityLeavesNoStatus(t *testing.T) {
	o := testorigin.Start(t)
	lis := "xdstp://a/envoy.config.listener.v3.Listener/"
	o.Apply("type: lds\nname: " + lis + "r\nresource:\n  \"@type\": type.googleapis.com/xds.core.v3.ResourceLocator\n  authority: nowhere\n  resource_type: envoy.config.listener.v3.Listener\n  id: x\n")
	c := startClient(t, fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}]}],"authorities":{"a":{}}}`, o.Addr), clientdata.Options{})
	got := make(chan clientdata.Event, 10)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"r", func(e clientdata.Event) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Kind != clientdata.Errored {
			t.Fatalf("%v %v", e.Kind, e.Err)
		}
	case <-time.After(testutil.Wait):
		t.Fatal("no event")
	}
	<-cancel()
	c.state.Do(func() {
		for k, st := range c.status {
			t.Errorf("status of %s kept: %+v", k.Name, *st)
		}
	})
}
