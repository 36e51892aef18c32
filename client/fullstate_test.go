package client_test

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// docs/protocol.md §1.7, §1.8: a full-state (CDS) response answering a request
// older than the latest leaves out names subscribed since; that does not
// make them not exist. Once a response answers a request naming them,
// leaving them out deletes them.
func TestSotWFullStateAnswersOlderRequest(t *testing.T) {
	addr, srv := startScriptedADS(t)
	c := newClient(t, bs{servers: []string{addr}, sotw: true}.build(t), client.Options{})
	ra, rb := newRecorder(t), newRecorder(t)
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "a", ra.handle); err != nil {
		t.Fatal(err)
	}
	srv.request(t, "a")
	if _, err := c.Watch(t.Context(), resource.ClusterURL, "b", rb.handle); err != nil {
		t.Fatal(err)
	}
	srv.request(t, "a", "b")
	// The answer to the first request, sent as the second crossed it.
	srv.send(t, "1", "n1", "a")
	ra.expect(client.Updated, "a", "")
	// The client acknowledges with both names; the server answers.
	srv.request(t, "a", "b")
	srv.send(t, "2", "n2", "a", "b")
	rb.expect(client.Updated, "b", "")
	// b is deleted: a response to a request naming it leaves it out.
	srv.request(t, "a", "b")
	srv.send(t, "3", "n3", "a")
	rb.expect(client.Removed, "b", "")
	// The client acknowledges: it has applied the response.
	srv.request(t, "a", "b")
	rb.none(drained(c))
}

// Many existing clusters watched at once over SotW (as `xdsd get` does):
// each is Updated, none is said not to exist because a response to an
// earlier, shorter request arrived first.
func TestSotWManyNamesAtOnce(t *testing.T) {
	o := testorigin.Start(t)
	var docs string
	for i := range 20 {
		docs += cluster(fmt.Sprintf("c%d", i), "c") + "---\n"
	}
	o.Apply(docs + cluster("z", "z"))
	for run := range 30 {
		c, err := client.New(bs{servers: []string{o.Addr}, sotw: true}.build(t), client.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		rs := make([]*recorder, 20)
		for i := range rs {
			rs[i] = newRecorder(t)
			if _, err := c.Watch(t.Context(), resource.ClusterURL, fmt.Sprintf("c%d", i), rs[i].handle); err != nil {
				t.Fatal(err)
			}
		}
		for i := range rs {
			if e := rs[i].next(); e.Kind != client.Updated {
				t.Errorf("run %d: first event %s", run, describe(e))
			}
		}
		c.Close()
	}
}
