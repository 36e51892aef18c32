package protocol_test

import (
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// stage applies u as a revision staged for the canary spec, as the
// origin does (db.Stage): Prev is read from the db before it. It returns
// a put for barriers that keeps the stage (an update without it ends it).
func (h *harness) stage(spec string, u db.Update) (*db.Stage, func(string)) {
	h.t.Helper()
	c, err := canary.Parse(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	st := &db.Stage{Canary: c, Prev: map[resource.Key][]*resource.Variant{}}
	h.db.Read(func(r *db.Reader) {
		keys := map[resource.Key]bool{}
		for _, v := range u.Puts {
			keys[resource.Key{Type: v.Type.URL, Name: v.Name}] = true
		}
		for _, k := range u.Deletes {
			keys[resource.Key{Type: k.Type, Name: k.Name}] = true
		}
		for _, k := range u.ResourceDeletes {
			keys[resource.Key{Type: k.Type, Name: k.Name}] = true
		}
		for k := range keys {
			st.Prev[k] = append([]*resource.Variant(nil), r.Variants(k.Type, k.Name)...)
		}
	})
	st.Rev = rev + 1
	u.Stage = st
	h.update(u)
	return st, func(n string) { h.update(db.Update{Puts: []*resource.Variant{secret(n)}, Stage: st}) }
}

// recv is the next response of c that is not a barrier's (a secret):
// barriers of several streams share names.
func recv(c *protocolDeltaClient) *discoveryv3.DeltaDiscoveryResponse {
	for {
		if r := c.Recv(); r.TypeUrl != resource.SecretURL {
			return r
		}
	}
}

// versions maps a delta response's resources to their versions.
func versions(r *discoveryv3.DeltaDiscoveryResponse) map[string]string {
	out := map[string]string{}
	for _, res := range r.Resources {
		out[res.Name] = res.Version
	}
	return out
}

// On-demand VHDS while a change to virtual hosts is staged (issue 31): an
// alias resolves through the stream's view. A stream outside the canary
// keeps the previous variant under its previous version, the domain the
// staged revision added is not found for it, and the virtual host it
// deleted still answers its alias; a canary stream gets the new variant,
// the new domain, and the deletion. Promoting the change reaches the
// others.
func TestStagedVHDSAliases(t *testing.T) {
	h := newHarness(t)
	h.put(vhost("rc/web", "www.example.com"), vhost("rc/api", "api.example.com"))
	var old map[string]string
	subscribe := func(id string) *protocolDelta {
		c := h.delta(node(id, nil))
		c.Sub(resource.VirtualHostURL)
		expect(t, c.Recv(), "route.v3.VirtualHost: ")
		c.Sub(resource.VirtualHostURL, "rc/www.example.com", "rc/new.example.com", "rc/api.example.com")
		r := c.Recv()
		c.Ack(r)
		return &protocolDelta{c, r}
	}
	in, out := subscribe("canary-1"), subscribe("edge-1")
	const before = "route.v3.VirtualHost: rc/api aliases=rc/api.example.com rc/new.example.com (no payload) aliases=rc/new.example.com rc/web aliases=rc/www.example.com"
	expect(t, out.first, before)
	old = versions(out.first)

	// Stage: rc/web also answers new.example.com; rc/api goes away.
	_, barrier := h.stage("node=canary-*", db.Update{
		Puts:            []*resource.Variant{vhost("rc/web", "www.example.com", "new.example.com")},
		ResourceDeletes: []db.Key{{Type: resource.VirtualHostURL, Name: "rc/api"}},
	})
	r := in.c.Recv()
	expect(t, r, "route.v3.VirtualHost: rc/api.example.com (no payload) aliases=rc/api.example.com rc/web aliases=rc/new.example.com,rc/www.example.com -rc/api")
	in.c.Ack(r)
	staged := versions(r)["rc/web"]
	if staged == old["rc/web"] {
		t.Fatalf("the canary got rc/web at its old version %s", staged)
	}
	out.c.Barrier(barrier) // nothing for the stream outside the canary

	// A stream outside the canary that subscribes now resolves through
	// the previous variants too, and one in the canary through the new.
	late := subscribe("edge-2")
	expect(t, late.first, before)
	if got := versions(late.first); got["rc/web"] != old["rc/web"] || got["rc/api"] != old["rc/api"] {
		t.Errorf("outside the canary, subscribing while staged: versions %v, want %v", got, old)
	}
	lateIn := subscribe("canary-2")
	expect(t, lateIn.first, "route.v3.VirtualHost: rc/api.example.com (no payload) aliases=rc/api.example.com rc/web aliases=rc/new.example.com,rc/www.example.com")
	if got := versions(lateIn.first)["rc/web"]; got != staged {
		t.Errorf("in the canary, subscribing while staged: rc/web at %s, want %s", got, staged)
	}
	// Unsubscribing by the virtual host's name drops the alias that got
	// it in the stream's own view: the staged rc/web answers
	// new.example.com only in the canary.
	late.c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.VirtualHostURL, ResourceNamesUnsubscribe: []string{"rc/api"}})
	late.c.Barrier(barrier)

	// Promote: the stage ends with the change put again, served to all.
	h.update(db.Update{Puts: []*resource.Variant{vhost("rc/web", "www.example.com", "new.example.com")}})
	expect(t, recv(out.c), "route.v3.VirtualHost: rc/api.example.com (no payload) aliases=rc/api.example.com rc/web aliases=rc/new.example.com,rc/www.example.com -rc/api")
	expect(t, recv(late.c), "route.v3.VirtualHost: rc/web aliases=rc/new.example.com,rc/www.example.com")
}

// protocolDelta is a delta stream and the first answer to its
// subscriptions.
type protocolDelta struct {
	c     *protocolDeltaClient
	first *discoveryv3.DeltaDiscoveryResponse
}

type protocolDeltaClient = protocoltest.Delta

// A delta client that reconnects while a revision is staged, declaring
// in initial_resource_versions what it holds (§2.9), is judged through
// its own view (issue 31): outside the canary, the previous variant it
// holds is current and the staged one is not sent; a stream that holds
// the staged variant but is outside is sent the previous one in its
// place; in the canary, the staged variant it holds is not sent again.
// The variant it declared is known whichever view it is of, so its
// replacement later comes with its removal, in one response (TP2).
func TestStagedDeclaredVersions(t *testing.T) {
	h := newHarness(t)
	h.put(route("r", "exists(env)", "old"))
	var vOld string
	h.db.Read(func(r *db.Reader) { vOld = r.Variants(resource.RouteURL, "r")[0].Version })
	_, barrier := h.stage("node=canary-*", db.Update{
		Puts:    []*resource.Variant{route("r", "env=test", "new")},
		Deletes: []resource.Key{{Type: resource.RouteURL, Name: "r", Constraints: constraint.MustParse("exists(env)").Key()}},
	})
	var vNew string
	h.db.Read(func(r *db.Reader) { vNew = r.Variants(resource.RouteURL, "r")[0].Version })
	reconnect := func(id, holds string) *protocolDeltaClient {
		c := h.delta(node(id, nil))
		c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, InitialResourceVersions: map[string]string{"r": holds},
			ResourceLocatorsSubscribe: []*discoveryv3.ResourceLocator{loc("r", "env", "test")}})
		return c
	}
	outCurrent := reconnect("edge-1", vOld)
	outCurrent.Barrier(barrier) // current: nothing sent
	inCurrent := reconnect("canary-1", vNew)
	inCurrent.Barrier(barrier) // current: nothing sent again
	outStale := reconnect("edge-2", vNew)
	r := outStale.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [exists(env)] -r [env=test]")
	if r.Resources[0].Version != vOld {
		t.Errorf("outside the canary, holding the staged variant: sent version %s, want the previous %s", r.Resources[0].Version, vOld)
	}
	outStale.Ack(r)
	inStale := reconnect("canary-2", vOld)
	r = inStale.Recv()
	expect(t, r, "route.v3.RouteConfiguration: r [env=test] -r [exists(env)]")
	if r.Resources[0].Version != vNew {
		t.Errorf("in the canary, holding the previous variant: sent version %s, want the staged %s", r.Resources[0].Version, vNew)
	}
	inStale.Ack(r)

	// Promote: those outside get the new variant and drop the one they
	// declared, in one response.
	h.update(db.Update{Puts: []*resource.Variant{route("r", "env=test", "new")}})
	for _, c := range []*protocolDeltaClient{outCurrent, outStale} {
		expect(t, recv(c), "route.v3.RouteConfiguration: r [env=test] -r [exists(env)]")
	}
}
