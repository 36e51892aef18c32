package client_test

import (
	"errors"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// Watch delivers a resource and its changes; a second watcher of the same
// resource gets the cached value at once without a new upstream response
// or subscription; the last cancel unsubscribes on the wire.
func TestWatchSharedAndCancelled(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := testorigin.Start(t)
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
			<-cancel1()
			barrier(t, c, o)
			if n := o.Subscriptions("a"); n != 1 {
				t.Errorf("one watcher left, but %d upstream subscriptions", n)
			}
			<-cancel2()
			barrier(t, c, o)
			if n := o.Subscriptions("a"); n != 0 {
				t.Errorf("after the last cancel, %d upstream subscriptions", n)
			}
			settled := barrier(t, c, o)
			r1.none(settled)
			r2.none(settled)
		})
	}
}

// Removals and does-not-exist (docs/protocol.md §1.8, §2.5): delta says so
// at once; SotW LDS/CDS by leaving the resource out; otherwise the timeout.
func TestRemovalAndDoesNotExist(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := testorigin.Start(t)
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
			o := testorigin.Start(t)
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
			for _, cl := range o.Srv.Streams() {
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

// Typed helpers decode the resource.
func TestWatchTyped(t *testing.T) {
	o := testorigin.Start(t)
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

// The last watcher of a resource cancelling and a new one watching it at
// once, before the stream sends anything: the cache let go of its copy, so
// the server must send it again — over SotW the request would otherwise
// name what the last one did, and the new watcher be told DoesNotExist
// (docs/protocol.md §1.6); over delta the subscription is sent again (§2.2).
func TestWatchAgainRightAfterTheLastCancel(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := testorigin.Start(t)
			o.Apply(cluster("a", "x"))
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: tr.sotw}.build(t), client.Options{DoesNotExistTimeout: 2 * time.Second})
			r := newRecorder(t)
			cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
			if err != nil {
				t.Fatal(err)
			}
			r.expect(client.Updated, "a", "")
			for i := range 20 {
				<-cancel() // its subscription has ended
				r = newRecorder(t)
				if cancel, err = c.Watch(t.Context(), resource.ClusterURL, "a", r.handle); err != nil {
					t.Fatal(err)
				}
				if e := r.next(); e.Kind != client.Updated {
					t.Fatalf("round %d: %s", i, describe(e))
				}
			}
			cancel()
		})
	}
}

// A resource the server sends after the client unsubscribed from it (the
// response crossed the unsubscription on the wire) is not cached: a later
// watcher of the name is not served that copy, which nothing would have
// kept current, but waits for the server's word.
func TestAnswerCrossingUnsubscribeIsNotCached(t *testing.T) {
	addr, s := startScriptedDeltaADS(t)
	c := newClient(t, bs{servers: []string{addr}}.build(t), client.Options{DoesNotExistTimeout: -1})
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	s.await(t, "subscribing a", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesSubscribe) == 1 && r.ResourceNamesSubscribe[0] == "a"
	})
	cancel()
	s.await(t, "unsubscribing a", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesUnsubscribe) == 1 && r.ResourceNamesUnsubscribe[0] == "a"
	})
	s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "late", Resources: []*discoveryv3.Resource{
		{Name: "a", Version: "1", Resource: mustAny(t, &clusterv3.Cluster{Name: "a"})}}}
	s.await(t, "acknowledging the late answer", func(r *discoveryv3.DeltaDiscoveryRequest) bool { return r.ResponseNonce == "late" })

	r := newRecorder(t)
	cancel, err = c.Watch(t.Context(), resource.ClusterURL, "a", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	s.await(t, "subscribing a again", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return len(r.ResourceNamesSubscribe) == 1 && r.ResourceNamesSubscribe[0] == "a"
	})
	s.resp <- &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "fresh", Resources: []*discoveryv3.Resource{
		{Name: "a", Version: "2", Resource: mustAny(t, &clusterv3.Cluster{Name: "a"})}}}
	if e := r.next(); e.Kind != client.Updated || e.Variant == nil || e.Variant.Version != "2" {
		t.Fatalf("first event %s, want the server's fresh version 2 (not the late copy)", describe(e))
	}
}

// The same xdstp name, its parameters in another order or escaped
// differently, is one subscription.
func TestSameNameSharesSubscription(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(listener("x?a=1&b=%7E", "x"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	r1, r2 := newRecorder(t), newRecorder(t)
	c.Watch(t.Context(), resource.ListenerURL, lis+"x?b=~&a=1", r1.handle)
	c.Watch(t.Context(), resource.ListenerURL, lis+"%78?a=%31&b=%7e", r2.handle)
	r1.expect(client.Updated, "", `"x"`)
	r2.expect(client.Updated, "", `"x"`)
	barrier(t, c, o)
	if n := o.Subscriptions(lis + "x?a=1&b=%7E"); n != 1 {
		t.Errorf("%d subscriptions", n)
	}
}
