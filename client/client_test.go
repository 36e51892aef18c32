package client_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

var transports = []struct {
	name string
	sotw bool
}{{"delta", false}, {"sotw", true}}

// Watch delivers a resource and its changes; a second watcher of the same
// resource gets the cached value at once without a new upstream response
// or subscription; the last cancel unsubscribes on the wire.
func TestWatchSharedAndCancelled(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(cluster("a", "one"))
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: tr.sotw}.build(t), client.Options{})
			r1 := newRecorder(t)
			cancel1, err := c.Watch(t.Context(), resource.ClusterURL, "a", r1.handle)
			if err != nil {
				t.Fatal(err)
			}
			r1.expect(client.Updated, "a", `"one"`)
			before := c.Stats()
			r2 := newRecorder(t)
			cancel2, err := c.Watch(t.Context(), resource.ClusterURL, "a", r2.handle)
			if err != nil {
				t.Fatal(err)
			}
			r2.expect(client.Updated, "a", `"one"`)
			if after := c.Stats(); after.Responses != before.Responses {
				t.Errorf("second watcher cost a response: %+v → %+v", before, after)
			}
			if n := o.Subscriptions("a"); n != 1 {
				t.Errorf("%d upstream subscriptions to a, want 1", n)
			}
			o.Apply(cluster("a", "two"))
			r1.expect(client.Updated, "a", `"two"`)
			r2.expect(client.Updated, "a", `"two"`)
			cancel1()
			barrier(t, c, o)
			if n := o.Subscriptions("a"); n != 1 {
				t.Errorf("one watcher left, but %d upstream subscriptions", n)
			}
			cancel2()
			barrier(t, c, o)
			if n := o.Subscriptions("a"); n != 0 {
				t.Errorf("after the last cancel, %d upstream subscriptions", n)
			}
			r1.none()
			r2.none()
		})
	}
}

// Removals and does-not-exist (docs/protocol.md §1.8, §2.5): delta says so
// at once; SotW LDS/CDS by leaving the resource out; otherwise the timeout.
func TestRemovalAndDoesNotExist(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(cluster("a", "one"))
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: tr.sotw}.build(t), client.Options{DoesNotExistTimeout: 300 * time.Millisecond})
			ra, rn := newRecorder(t), newRecorder(t)
			c.Watch(t.Context(), resource.ClusterURL, "a", ra.handle)
			c.Watch(t.Context(), resource.RouteURL, "no-such-route", rn.handle)
			ra.expect(client.Updated, "a", "one")
			rn.expect(client.DoesNotExist, "no-such-route", "")
			o.Remove("cds", "a")
			ra.expect(client.Removed, "a", "")
			o.Apply(cluster("a", "back"))
			ra.expect(client.Updated, "a", "back")
		})
	}
}

// A resource the application rejects is NACKed with the reason, the NACK
// shows in the server's /v1/clients, and the last good value stays.
func TestNackKeepsLastGoodValue(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(cluster("a", "good"))
			reject := func(v *resource.Variant, m proto.Message) error {
				if c, ok := m.(*clusterv3.Cluster); ok && c.AltStatName == "bad" {
					return errors.New("alt_stat_name bad is not allowed here")
				}
				return nil
			}
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: tr.sotw}.build(t), client.Options{Validate: reject})
			r := newRecorder(t)
			c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
			r.expect(client.Updated, "a", "good")
			o.Apply(cluster("a", "bad"))
			e := r.expect(client.Errored, "a", "alt_stat_name bad is not allowed here")
			if e.Variant == nil || e.Variant.Version != "1" {
				t.Fatalf("last good value not kept: %s", describe(e))
			}
			barrier(t, c, o)
			var nack string
			for _, cl := range o.Srv.Clients() {
				for _, ty := range cl.Types {
					if ty.LastNack != nil {
						nack = ty.LastNack.Error
					}
				}
			}
			if nack != "a: rejected: alt_stat_name bad is not allowed here" {
				t.Fatalf("server saw NACK %q", nack)
			}
			if c.Stats().NACKs != 1 {
				t.Errorf("stats %+v", c.Stats())
			}
			o.Apply(cluster("a", "fixed"))
			r.expect(client.Updated, "a", "fixed")
		})
	}
}

// TP2 (docs/protocol.md §4): subscriptions carry the authority's (or the
// top-level) dynamic parameters as resource locators, and each watcher gets
// the variant that matches them.
func TestDynamicParameters(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := servertest.Start(t)
			for _, v := range []struct{ cons, tag string }{{"env=prod", "legacy-prod"}, {"env=test", "legacy-test"}} {
				o.Apply(fmt.Sprintf("name: r\nconstraints: %s\nresource:\n%s", v.cons, indent(cluster("r", v.tag))))
			}
			x := "xdstp://auth/envoy.config.cluster.v3.Cluster/r"
			for _, v := range []struct{ cons, tag string }{{"zone=a", "zone-a"}, {"zone=b", "zone-b"}} {
				o.Apply(fmt.Sprintf("name: %s\nconstraints: %s\nresource:\n%s", x, v.cons, indent(cluster(x, v.tag))))
			}
			b := bs{servers: []string{o.Addr}, sotw: tr.sotw, params: map[string]string{"env": "test"},
				authorities: map[string][]string{"auth": nil}, authParams: map[string]map[string]string{"auth": {"zone": "b"}}}.build(t)
			c := newClient(t, b, client.Options{})
			r := newRecorder(t)
			c.Watch(t.Context(), resource.ClusterURL, "r", r.handle)
			e := r.expect(client.Updated, "r", "legacy-test")
			if e.Variant.Constraints.String() != "env=test" {
				t.Errorf("variant constraints %q", e.Variant.Constraints)
			}
			rx := newRecorder(t)
			c.Watch(t.Context(), resource.ClusterURL, x, rx.handle)
			rx.expect(client.Updated, x, "zone-b")
			// The variant is deleted (removed_resource_names over delta, left
			// out over SotW): the watcher is told it is gone.
			cl, _ := resource.Lookup("cds")
			o.Commit(store.Batch{Deletes: []store.Delete{{Type: cl.URL, Name: "r", Constraints: constraint.MustParse("env=test").Key()}}})
			r.expect(client.Removed, "r", "")
		})
	}
}

// Typed helpers decode the resource.
func TestWatchTyped(t *testing.T) {
	o := servertest.Start(t)
	o.Apply(cluster("a", "typed"))
	c := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{})
	got := make(chan *clusterv3.Cluster, 1)
	cancel, err := c.WatchCluster(t.Context(), "a", func(e client.TypedEvent[*clusterv3.Cluster]) {
		if e.Kind == client.Updated {
			got <- e.Resource
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	select {
	case cl := <-got:
		if cl.AltStatName != "typed" {
			t.Fatalf("got %v", cl)
		}
	case <-time.After(wait):
		t.Fatal("no typed event")
	}
}

// TP2 over SotW, where a route configuration response is not full state:
// a variant set that replaces the unconstrained variant reaches a client
// as the new variant for its parameters alone, and that replaces what it
// held — nothing else will say the unconstrained one went.
func TestSotWVariantReplacesUnconstrained(t *testing.T) {
	o := servertest.Start(t)
	route := func(tag string) string {
		return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: %s\n  domains: [\"*\"]\n", tag)
	}
	o.Apply(route("plain"))
	c := newClient(t, bs{servers: []string{o.Addr}, sotw: true, params: map[string]string{"env": "test"}}.build(t), client.Options{})
	r := newRecorder(t)
	c.Watch(t.Context(), resource.RouteURL, "r", r.handle)
	r.expect(client.Updated, "r", "plain")
	o.Apply("name: r\nconstraints: env=test\nresource:\n" + indent(route("for-test")) +
		"---\nname: r\nconstraints: \"!exists(env)\"\nresource:\n" + indent(route("no-env")))
	e := r.expect(client.Updated, "r", "for-test")
	if e.Variant.Constraints.String() != "env=test" {
		t.Errorf("variant constraints %q", e.Variant.Constraints)
	}
	barrier(t, c, o)
	r.none()
}
