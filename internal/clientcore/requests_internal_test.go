package clientcore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// These tests drive a channel's request building by hand: responses go in
// through handleSotW and handleDelta, and requests() shows what the stream
// would send next — so what two responses arriving before a send do is
// pinned without racing the stream.

// testChannel is a channel with a stream up to one server (SotW or delta)
// and no goroutine of its own: the test drives it, on the client's state
// goroutine. Resources named "bad" in a response of version "1" (SotW) or
// "x" (delta) are rejected.
func testChannel(t *testing.T, sotw bool) (*testCh, clientdata.ServerConfig) {
	t.Helper()
	b, err := clientdata.ParseBootstrap([]byte(`{"xds_servers":[{"server_uri":"127.0.0.1:1","channel_creds":[{"type":"insecure"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reject := func(v *resource.Variant, _ proto.Message) error {
		if strings.HasPrefix(v.Name, "bad") && (v.Version == "1" || v.Version == "x") {
			return errors.New("bad version")
		}
		return nil
	}
	c, err := New(b, clientdata.Options{Logger: testorigin.Quiet, DoesNotExistTimeout: -1, Validate: reject}, cachepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv := clientdata.ServerConfig{URI: "test"}
	if sotw {
		srv.Transport = "sotw"
	}
	ch := &channel{c: c, servers: []clientdata.ServerConfig{srv}, wake: make(chan struct{}, 1), types: map[string]*upType{},
		connected: 0, healthy: true, versionsFrom: 0}
	return &testCh{ch}, srv
}

// testCh runs a channel's methods on its client's state goroutine, as the
// channel's own goroutines would.
type testCh struct{ *channel }

func (ch *testCh) do(f func()) { ch.c.state.Do(f) }

func (ch *testCh) testSubscribe(typeURL string, names ...string) {
	for _, n := range names {
		s := db.NewSub(typeURL, n, nil)
		ch.do(func() { ch.subscribe(&s) })
	}
}

func (ch *testCh) requests(srv clientdata.ServerConfig) (out []proto.Message) {
	ch.do(func() { out = ch.channel.requests(srv) })
	return out
}

func (ch *testCh) handleSotW(r *discoveryv3.DiscoveryResponse, srv clientdata.ServerConfig) {
	d := ch.c.decodeSotW(r)
	ch.do(func() { ch.channel.handleSotW(r, d, srv) })
}

func (ch *testCh) handleDelta(r *discoveryv3.DeltaDiscoveryResponse, srv clientdata.ServerConfig) {
	d := ch.c.decodeDelta(r)
	ch.do(func() { ch.channel.handleDelta(r, d, srv) })
}

func (ch *testCh) unsubscribe(typeURL, name string) {
	ch.do(func() { ch.channel.unsubscribe(db.Key{Type: typeURL, Name: name}) })
}

func (ch *testCh) refetch(typeURL, name string) {
	ch.do(func() { ch.channel.refetch(db.Key{Type: typeURL, Name: name}) })
}

func (ch *testCh) needFresh(typeURL, name string, add int) {
	ch.do(func() { ch.channel.needFresh(typeURL, name, add) })
}

func anyOf(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sotwResponse(t *testing.T, typeURL, version, nonce string, names ...string) *discoveryv3.DiscoveryResponse {
	r := &discoveryv3.DiscoveryResponse{TypeUrl: typeURL, VersionInfo: version, Nonce: nonce}
	for _, n := range names {
		var m proto.Message = &clusterv3.Cluster{Name: n}
		if typeURL == resource.EndpointURL {
			m = &endpointv3.ClusterLoadAssignment{ClusterName: n}
		}
		r.Resources = append(r.Resources, anyOf(t, m))
	}
	return r
}

func deltaResponse(t *testing.T, version, nonce string, names ...string) *discoveryv3.DeltaDiscoveryResponse {
	r := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: nonce}
	for _, n := range names {
		r.Resources = append(r.Resources, &discoveryv3.Resource{Name: n, Version: version, Resource: anyOf(t, &clusterv3.Cluster{Name: n})})
	}
	return r
}

// sotwSent describes SotW requests as "names version nonce [error]".
func sotwSent(ms []proto.Message) []string {
	var out []string
	for _, m := range ms {
		r := m.(*discoveryv3.DiscoveryRequest)
		s := fmt.Sprintf("%v %s %s", r.ResourceNames, r.VersionInfo, r.ResponseNonce)
		if r.ErrorDetail != nil {
			s += " NACK " + r.ErrorDetail.Message
		}
		out = append(out, s)
	}
	return out
}

// deltaSent describes delta requests as "+subscribed -unsubscribed nonce
// [error]".
func deltaSent(ms []proto.Message) []string {
	var out []string
	for _, m := range ms {
		r := m.(*discoveryv3.DeltaDiscoveryRequest)
		s := fmt.Sprintf("+%v -%v %s", r.ResourceNamesSubscribe, r.ResourceNamesUnsubscribe, r.ResponseNonce)
		if r.ErrorDetail != nil {
			s += " NACK " + r.ErrorDetail.Message
		}
		out = append(out, s)
	}
	return out
}

func checkSent(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("sent:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// docs/protocol.md §1.6: the last subscriber of a name leaving and a new one
// coming before the stream sends anything must not leave the server
// unaware: the cache dropped its copy, so over SotW the name is left out of
// one request and put back (the server sends newly added names); over delta
// it is subscribed again, which a server must answer (§2.2).
func TestResubscribeBeforeRequestFetchesAgain(t *testing.T) {
	t.Run("sotw", func(t *testing.T) {
		ch, srv := testChannel(t, true)
		ch.testSubscribe(resource.ClusterURL, "a", "b")
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[a b]  "})
		ch.handleSotW(sotwResponse(t, resource.ClusterURL, "1", "n1", "a", "b"), srv)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[a b] 1 n1"})

		ch.unsubscribe(resource.ClusterURL, "a")
		ch.testSubscribe(resource.ClusterURL, "a")
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b] 1 n1", "[a b] 1 n1"})
		checkSent(t, sotwSent(ch.requests(srv)), nil)
	})
	t.Run("delta", func(t *testing.T) {
		ch, srv := testChannel(t, false)
		ch.testSubscribe(resource.ClusterURL, "a", "b")
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[a b] -[] "})
		ch.handleDelta(deltaResponse(t, "1", "n1", "a", "b"), srv)
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[] -[] n1"})

		ch.unsubscribe(resource.ClusterURL, "a")
		ch.testSubscribe(resource.ClusterURL, "a")
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[a] -[] "})
	})
}

// A NACK due is not lost when another response arrives before the stream
// sends it. Delta (§2.1): each response is acknowledged by its own nonce,
// so the NACK goes first, then the ACK. SotW: a request carries the newest
// nonce (§1.1) and a server ignores older ones (§1.8), so the request
// answering the newer response reports the rejection — unless that
// response superseded it: it held the resource again, or it is a
// full-state response (§1.7), which holds the whole type.
func TestNACKOvertakenByAResponse(t *testing.T) {
	t.Run("delta", func(t *testing.T) {
		ch, srv := testChannel(t, false)
		ch.testSubscribe(resource.ClusterURL, "bad", "b", "c")
		ch.requests(srv)
		ch.handleDelta(deltaResponse(t, "x", "n1", "bad"), srv)
		ch.handleDelta(deltaResponse(t, "y", "n2", "b"), srv)
		ch.handleDelta(deltaResponse(t, "y", "n3", "c"), srv)
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[] -[] n1 NACK bad: rejected: bad version", "+[] -[] n3"})

		// Two NACKs in a row, and a subscription change: each NACK goes,
		// the change with the last acknowledgement.
		ch.handleDelta(deltaResponse(t, "x", "n4", "bad"), srv)
		ch.handleDelta(deltaResponse(t, "x", "n5", "bad2"), srv)
		ch.testSubscribe(resource.ClusterURL, "d")
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[] -[] n4 NACK bad: rejected: bad version", "+[d] -[] n5 NACK bad2: rejected: bad version"})
		checkSent(t, deltaSent(ch.requests(srv)), nil)
	})
	t.Run("sotw", func(t *testing.T) {
		ch, srv := testChannel(t, true)
		ch.testSubscribe(resource.EndpointURL, "bad", "b")
		ch.requests(srv)
		// Not full state: a response holding only b leaves the rejection of
		// "bad" standing; it is reported with the newest nonce.
		ch.handleSotW(sotwResponse(t, resource.EndpointURL, "1", "n1", "bad"), srv)
		ch.handleSotW(sotwResponse(t, resource.EndpointURL, "2", "n2", "b"), srv)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b bad] 2 n2 NACK bad: rejected: bad version"})
		// Sent once: the next response is acknowledged plainly.
		ch.handleSotW(sotwResponse(t, resource.EndpointURL, "3", "n3", "b"), srv)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b bad] 3 n3"})

		// Superseded by a good copy before the NACK went: an ACK.
		ch.handleSotW(sotwResponse(t, resource.EndpointURL, "1", "n4", "bad"), srv)
		ch.handleSotW(sotwResponse(t, resource.EndpointURL, "5", "n5", "bad", "b"), srv)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b bad] 5 n5"})

		// Full state: the newer response holds the whole type.
		ch.testSubscribe(resource.ClusterURL, "bad", "b")
		ch.requests(srv)
		ch.handleSotW(sotwResponse(t, resource.ClusterURL, "1", "c1", "bad", "b"), srv)
		ch.handleSotW(sotwResponse(t, resource.ClusterURL, "2", "c2", "b"), srv)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b bad] 2 c2"})
	})
}

// A SotW fetch-again (a request leaving names out, then one putting them
// back) while a NACK is due: the first request is the NACK, not something a
// server takes for an ACK of the rejected response (§1.3).
func TestFetchAgainWhileNACKDueSendsTheNACK(t *testing.T) {
	ch, srv := testChannel(t, true)
	ch.testSubscribe(resource.EndpointURL, "bad", "b")
	ch.requests(srv)
	ch.handleSotW(sotwResponse(t, resource.EndpointURL, "0", "n0", "b"), srv)
	ch.requests(srv)
	ch.handleSotW(sotwResponse(t, resource.EndpointURL, "1", "n1", "bad"), srv)
	ch.refetch(resource.EndpointURL, "b")
	checkSent(t, sotwSent(ch.requests(srv)), []string{"[bad] 0 n1 NACK bad: rejected: bad version", "[b bad] 0 n1"})
}

// An #alt= watcher switching to its fallback while its primary's stream is
// open but not yet proven needs the primary's fresh word on the name: the
// stream may have declared the version held (delta, §2.9) or been answered
// already, so the name is fetched again.
func TestNeedFreshOnAnOpenStreamFetchesAgain(t *testing.T) {
	t.Run("delta", func(t *testing.T) {
		ch, srv := testChannel(t, false)
		ch.testSubscribe(resource.ClusterURL, "a")
		ch.requests(srv)
		ch.handleDelta(deltaResponse(t, "1", "n1", "a"), srv)
		ch.requests(srv)
		ch.needFresh(resource.ClusterURL, "a", 1)
		checkSent(t, deltaSent(ch.requests(srv)), []string{"+[a] -[] "})
		ch.needFresh(resource.ClusterURL, "a", 1) // a second watcher: no need to ask again
		checkSent(t, deltaSent(ch.requests(srv)), nil)
	})
	t.Run("sotw", func(t *testing.T) {
		ch, srv := testChannel(t, true)
		ch.testSubscribe(resource.ClusterURL, "a", "b")
		ch.requests(srv)
		ch.handleSotW(sotwResponse(t, resource.ClusterURL, "1", "n1", "a", "b"), srv)
		ch.requests(srv)
		ch.needFresh(resource.ClusterURL, "a", 1)
		checkSent(t, sotwSent(ch.requests(srv)), []string{"[b] 1 n1", "[a b] 1 n1"})
	})
}

// What lingers through an outage (its watch ended while no stream was
// healthy) stays held, with its TTL, but a reconnecting delta stream does
// not declare it (§2.9: the cache drops it once a stream is healthy); a
// subscribed resource is declared. Once healthy, the channel lets go of it.
func TestLingeringIsNotDeclared(t *testing.T) {
	ch, srv := testChannel(t, false)
	ch.testSubscribe(resource.ClusterURL, "kept", "left")
	ch.requests(srv)
	ch.handleDelta(deltaResponse(t, "1", "n1", "kept", "left"), srv)
	ch.requests(srv)

	// The stream goes; "left" is unsubscribed meanwhile.
	ch.do(func() { ch.connected, ch.healthy = -1, false })
	ch.unsubscribe(resource.ClusterURL, "left")
	var ty *upType
	ch.do(func() {
		ty = ch.types[resource.ClusterURL]
		if ty.held["left"] == nil {
			t.Error("lingering: not held")
		}
		// A new stream to the same server.
		ch.connected = 0
		ty.requested, ty.declare = false, true
	})
	reqs := ch.requests(srv)
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if got := reqs[0].(*discoveryv3.DeltaDiscoveryRequest).InitialResourceVersions; len(got) != 1 || got["kept"] != "1" {
		t.Errorf("declared %v, want kept only", got)
	}
	ch.do(func() {
		ch.proven(0)
		if ty.held["left"] != nil || ty.held["kept"] == nil || len(ty.retained) != 0 {
			t.Errorf("once healthy: held %v, lingering %v", ty.held, ty.retained)
		}
	})
}

// A new stream starts clean: a fetch-again or a NACK due on the old one is
// not sent on it (its first request names everything anew; the nonce is
// the old stream's).
func TestNewStreamDropsWhatWasDueOnTheOld(t *testing.T) {
	ch, srv := testChannel(t, true)
	ch.testSubscribe(resource.EndpointURL, "bad", "b")
	ch.requests(srv)
	ch.handleSotW(sotwResponse(t, resource.EndpointURL, "1", "n1", "bad", "b"), srv)
	ch.refetch(resource.EndpointURL, "b")
	ch.do(func() {
		for _, ty := range ch.types {
			ty.newStream(true)
		}
	})
	checkSent(t, sotwSent(ch.requests(srv)), []string{"[b bad]  "})
	checkSent(t, sotwSent(ch.requests(srv)), nil)
}

// A delta fetch-again (a do_not_cache copy may not answer a new
// subscriber) asked while no stream is up, or not sent before the stream
// went, is not lost: the new stream's first request does not declare the
// name held, so the server sends it again (§2.9).
func TestDeltaFetchAgainSurvivesANewStream(t *testing.T) {
	ch, srv := testChannel(t, false)
	ch.testSubscribe(resource.ClusterURL, "dnc", "other")
	ch.requests(srv)
	ch.handleDelta(deltaResponse(t, "1", "n1", "dnc", "other"), srv)
	ch.requests(srv)

	ch.do(func() { ch.connected, ch.healthy = -1, false })
	ch.refetch(resource.ClusterURL, "dnc")
	ch.do(func() {
		ch.connected = 0
		for _, ty := range ch.types {
			ty.newStream(true)
		}
	})
	reqs := ch.requests(srv)
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0].(*discoveryv3.DeltaDiscoveryRequest)
	if got := r.InitialResourceVersions; len(got) != 1 || got["other"] != "1" {
		t.Errorf("declared %v, want other only (dnc is to be fetched again)", got)
	}
	if !slices.Equal(r.ResourceNamesSubscribe, []string{"dnc", "other"}) {
		t.Errorf("subscribed %v", r.ResourceNamesSubscribe)
	}
	checkSent(t, deltaSent(ch.requests(srv)), nil)
}

// A delta server that did not know the client held a variant (declared by
// a version that no longer existed when the stream came back) sends its
// replacement without the deletion. A TP2 subscription is sent the one
// variant matching its parameters, and variants never overlap, so the
// other held variant matching them is gone: the client drops it, and a
// later deletion of the replacement cannot bring the stale one back.
func TestDeltaVariantReplacesUndeletedOne(t *testing.T) {
	ch, srv := testChannel(t, false)
	params := constraint.Params{"env": "test"}
	s := db.NewSub(resource.ClusterURL, "c", params)
	s.Locator = true
	ch.do(func() { ch.subscribe(&s) })
	ch.requests(srv)
	variant := func(version, cons string) *discoveryv3.Resource {
		return &discoveryv3.Resource{Version: version, Resource: anyOf(t, &clusterv3.Cluster{Name: "c"}),
			ResourceName: &discoveryv3.ResourceName{Name: "c", DynamicParameterConstraints: constraint.MustParse(cons).Proto()}}
	}
	ch.handleDelta(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "1", Resources: []*discoveryv3.Resource{variant("1", "exists(env)")}}, srv)
	ch.handleDelta(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resource.ClusterURL, Nonce: "2", Resources: []*discoveryv3.Resource{variant("2", "env=test")}}, srv)
	var held string
	ch.do(func() { held = fmt.Sprint(ch.types[resource.ClusterURL].held["c"]) })
	if want := fmt.Sprint(map[string]string{constraint.MustParse("env=test").Key(): "2"}); held != want {
		t.Errorf("held %s, want %s", held, want)
	}
}

// docs/protocol.md §1.7, §1.8: which subscriptions the request a full-state
// response answers surely named. Requests are numbered from 1; a response
// holding a resource answers a request naming it.
func TestSentRequests(t *testing.T) {
	keys := func(names ...string) map[db.Key]bool {
		m := map[db.Key]bool{}
		for _, n := range names {
			m[db.Key{Name: n}] = true
		}
		return m
	}
	puts := func(names ...string) []*resource.Variant {
		var out []*resource.Variant
		for _, n := range names {
			out = append(out, &resource.Variant{Name: n})
		}
		return out
	}
	type step struct {
		request  []string // a request naming these, or
		response []string // a response holding these
		named    []string // then: surely named by what it answers
		not      []string // and: perhaps not
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a response to the first of two requests", []step{
			{request: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a"}, not: []string{"b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a", "b"}},
		}},
		{"an empty response answers the requests so far", []step{
			{request: []string{"a"}},
			{response: nil, named: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: nil, named: []string{"a"}, not: []string{"b"}},
		}},
		{"a name left out of a request and put back (a refetch)", []step{
			{request: []string{"a", "b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
			{request: []string{"a"}},
			{request: []string{"a", "b"}},
			{response: []string{"a"}, named: []string{"a"}, not: []string{"b"}},
			{response: []string{"a", "b"}, named: []string{"a", "b"}},
		}},
		{"a name named before, dropped, named again", []step{
			{request: []string{"a"}},
			{request: nil},
			{request: []string{"a"}},
			{response: nil, not: []string{"a"}},
			{response: []string{"a"}, named: []string{"a"}},
		}},
		{"a response crossing a refetch and a new name", []step{
			{request: []string{"a", "m"}},
			{response: []string{"a", "m"}, named: []string{"a", "m"}},
			{request: []string{"a", "q"}},
			{request: []string{"a", "m", "q"}},
			{response: []string{"a", "m"}, named: []string{"a", "m"}, not: []string{"q"}},
			{response: []string{"a", "m", "q"}, named: []string{"a", "m", "q"}},
		}},
		{"the wildcard", []step{
			{request: []string{"*"}},
			{request: []string{"*", "b"}},
			{response: []string{"x"}, named: []string{"*"}, not: []string{"b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r sentRequests
			for i, s := range tc.steps {
				if s.response == nil && s.named == nil && s.not == nil {
					r.record(keys(s.request...))
					continue
				}
				r.answered(puts(s.response...))
				for _, n := range s.named {
					if !r.named(db.Key{Name: n}) {
						t.Errorf("step %d: %s not surely named", i, n)
					}
				}
				for _, n := range s.not {
					if r.named(db.Key{Name: n}) {
						t.Errorf("step %d: %s surely named", i, n)
					}
				}
			}
		})
	}
}
