package client_test

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// routeDoc is a route configuration document named name, told apart by
// its virtual host's name, with the given constraints ("" for none).
func routeDoc(name, marker, cons string) string {
	doc := "name: " + name + "\n"
	if cons != "" {
		doc += "constraints: \"" + cons + "\"\n"
	}
	return doc + "resource:\n  \"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\n  name: " + name +
		"\n  virtual_hosts:\n  - name: " + marker + "\n    domains: [\"*\"]\n"
}

// docs/architecture.md §4.5 over SotW: a client subscribing by plain name, which the
// server answers by its node metadata, is moved to the matching variant
// when a resource becomes several variants. It takes wrapped resources, so
// the variant comes with its constraints: it replaces the unconstrained
// copy the client held (a route configuration response is not full state
// and cannot say that copy went).
func TestSotWPlainNameFollowsResourceBecomingVariants(t *testing.T) {
	o := servertest.Start(t)
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
