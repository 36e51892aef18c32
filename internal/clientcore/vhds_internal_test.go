package clientcore

import (
	"context"
	"fmt"
	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/testutil"
	"net"
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// newVHDSClient starts a client of one delta server with fast backoff.
func newVHDSClient(t *testing.T, addr string) *Client {
	t.Helper()
	return startClient(t, fmt.Sprintf(`{"xds_servers":[{"server_uri":%q,"channel_creds":[{"type":"insecure"}]}]}`, addr),
		clientdata.Options{BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
}

// vhdsLeftovers lists what a client still knows of virtual hosts: what
// its channel holds (and a reconnecting stream would declare), their TTL
// timers, their statuses, and what the cache holds.
func vhdsLeftovers(c *Client, ch *channel) string {
	var out string
	c.state.Do(func() {
		if t := ch.types[resource.VirtualHostURL]; t != nil {
			if len(t.held) > 0 {
				out += fmt.Sprintf(" held %v;", t.held)
			}
			if len(t.ttl) > 0 {
				out += fmt.Sprintf(" %d TTL timers;", len(t.ttl))
			}
		}
		for k, st := range c.status {
			out += fmt.Sprintf(" status %s %+v;", k.Name, *st)
		}
	})
	c.db.Read(func(r *db.Reader) {
		if ns := r.Names(resource.VirtualHostURL); len(ns) > 0 {
			out += fmt.Sprintf(" cached %v;", ns)
		}
	})
	return out
}

// channelOf is the channel serving a name.
func channelOf(c *Client, n string) (ch *channel) {
	c.state.Do(func() { ch, _ = c.route(n) })
	return ch
}

func watchEvents(t *testing.T, c *Client, n string) (chan clientdata.Event, CancelFunc) {
	t.Helper()
	got := make(chan clientdata.Event, 10)
	cancel, err := c.Watch(context.Background(), resource.VirtualHostURL, n, func(e clientdata.Event) { got <- e })
	if err != nil {
		t.Fatal(err)
	}
	return got, cancel
}

func expectKind(t *testing.T, got chan clientdata.Event, k clientdata.EventKind) {
	t.Helper()
	select {
	case e := <-got:
		if e.Kind != k {
			t.Fatalf("event %v, want %v", e.Kind, k)
		}
	case <-time.After(testutil.Wait):
		t.Fatalf("no event, want %v", k)
	}
}

// The last watch of an on-demand VHDS name ending takes with it the
// virtual host the name resolved to: out of the cache, out of what the
// channel holds (so a reconnecting stream does not declare it in
// initial_resource_versions), and out of the client's statuses.
func TestVHDSCancelForgetsVirtualHost(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply("\"@type\": type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: rc/web\ndomains: [\"*.example.org\"]\n")
	c := newVHDSClient(t, o.Addr)
	got, cancel := watchEvents(t, c, "rc/a.example.org")
	expectKind(t, got, clientdata.Updated)
	<-cancel()
	ch := channelOf(c, "rc/a.example.org")
	if left := vhdsLeftovers(c, ch); left != "" {
		t.Errorf("after the last watch ended:%s", left)
	}
	// A stream to the same server again: the virtual host comes anew.
	var gen0 int
	c.state.Do(func() { gen0 = ch.gen })
	o.Stop()
	o.Start()
	testutil.Eventually(t, "a new stream", func() (ok bool) {
		c.state.Do(func() { ok = ch.gen > gen0 && ch.connected >= 0 })
		return ok
	})
	got, cancel = watchEvents(t, c, "rc/a.example.org")
	defer cancel()
	expectKind(t, got, clientdata.Updated)
}

// A VHDS watch ending while its upstream is down leaves its virtual host
// cached (lingering, for a watcher coming back meanwhile); once the
// upstream is healthy again it is evicted with the name — virtual host
// included.
func TestVHDSLingeringEvictionTakesVirtualHost(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply("\"@type\": type.googleapis.com/envoy.config.route.v3.VirtualHost\nname: rc/web\ndomains: [\"*.example.org\"]\n")
	c := newVHDSClient(t, o.Addr)
	got, cancel := watchEvents(t, c, "rc/a.example.org")
	expectKind(t, got, clientdata.Updated)
	o.Stop()
	ch := channelOf(c, "rc/a.example.org")
	testutil.Eventually(t, "the stream to go down", func() (down bool) {
		c.state.Do(func() { down = !ch.up() })
		return down
	})
	<-cancel()
	var cached bool
	c.db.Read(func(r *db.Reader) { cached = len(r.Variants(resource.VirtualHostURL, "rc/web")) > 0 })
	if !cached {
		t.Fatal("rc/web evicted while its upstream was down (it should linger)")
	}
	o.Start()
	testutil.Eventually(t, "rc/web evicted once the upstream is healthy", func() bool {
		c.db.Read(func(r *db.Reader) { cached = len(r.Variants(resource.VirtualHostURL, "rc/web")) > 0 })
		return !cached
	})
	if left := vhdsLeftovers(c, ch); left != "" {
		t.Errorf("after the lingering name was evicted:%s", left)
	}
}

// ttlVHDS is a delta server answering any VHDS subscription with one
// virtual host, with a TTL, under the requested name as alias.
type ttlVHDS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	ttl time.Duration
}

func (s *ttlVHDS) DeltaAggregatedResources(st discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	for n := 0; ; n++ {
		req, err := st.Recv()
		if err != nil {
			return err
		}
		if len(req.ResourceNamesSubscribe) == 0 {
			continue
		}
		a, err := anypb.New(&routev3.VirtualHost{Name: "rc/web", Domains: []string{"*.example.org"}})
		if err != nil {
			return err
		}
		if err := st.Send(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: req.TypeUrl, Nonce: fmt.Sprint(n),
			Resources: []*discoveryv3.Resource{{Name: "rc/web", Version: "1", Aliases: req.ResourceNamesSubscribe, Resource: a, Ttl: durationpb.New(s.ttl)}}}); err != nil {
			return err
		}
	}
}

// The TTL timer of the virtual host a VHDS name resolved to ends with the
// name's last watch: it does not fire later for a resource nothing
// subscribes to (and leave a status behind).
func TestVHDSCancelStopsVirtualHostTTL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(g, &ttlVHDS{ttl: time.Hour})
	go g.Serve(l)
	t.Cleanup(g.Stop)
	c := newVHDSClient(t, l.Addr().String())
	got, cancel := watchEvents(t, c, "rc/a.example.org")
	expectKind(t, got, clientdata.Updated)
	ch := channelOf(c, "rc/a.example.org")
	var timers int
	c.state.Do(func() { timers = len(ch.types[resource.VirtualHostURL].ttl) })
	if timers != 1 {
		t.Fatalf("%d TTL timers while watched, want 1", timers)
	}
	<-cancel()
	if left := vhdsLeftovers(c, ch); left != "" {
		t.Errorf("after the last watch ended:%s", left)
	}
}
