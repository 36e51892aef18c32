package client_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// TP2 (docs/protocol.md §4): subscriptions carry the authority's (or the
// top-level) dynamic parameters as resource locators, and each watcher gets
// the variant that matches them.
func TestDynamicParameters(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			o := testorigin.Start(t)
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

// TP2 over SotW, where a route configuration response is not full state:
// a variant set that replaces the unconstrained variant reaches a client
// as the new variant for its parameters alone, and that replaces what it
// held — nothing else will say the unconstrained one went.
func TestSotWVariantReplacesUnconstrained(t *testing.T) {
	o := testorigin.Start(t)
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
	r.none(barrier(t, c, o))
}

// docs/architecture.md §4.5 over SotW: a client subscribing by plain name, which the
// server answers by its node metadata, is moved to the matching variant
// when a resource becomes several variants. It takes wrapped resources, so
// the variant comes with its constraints: it replaces the unconstrained
// copy the client held (a route configuration response is not full state
// and cannot say that copy went).
func TestSotWPlainNameFollowsResourceBecomingVariants(t *testing.T) {
	o := testorigin.Start(t)
	o.Apply(routeDoc("r1", "plain", ""))
	c := newClient(t, bs{servers: []string{o.Addr}, sotw: true}.build(t), client.Options{})
	r := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.RouteURL, "r1", r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if e := r.next(); e.Kind != client.Updated || !strings.Contains(describe(e), `"plain"`) {
		t.Fatalf("first event %s", describe(e))
	}
	o.Apply(routeDoc("r1", "prod", "env=prod") + "---\n" + routeDoc("r1", "no-env", "!exists(env)"))
	if e := r.next(); e.Kind != client.Updated || !strings.Contains(describe(e), `"no-env"`) {
		t.Fatalf("after the variants came: %s, want the !exists(env) variant", describe(e))
	}
}
