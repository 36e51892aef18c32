package client_test

import (
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// A glob watch is cancelled, then one of its members is watched directly
// across a server restart: the member is fetched again and delivered. (Its
// version, kept from the glob, was declared in initial_resource_versions,
// so the server sent nothing, and the does-not-exist timer never started:
// the watch waited for ever.)
func TestGlobCancelForgetsMembers(t *testing.T) {
	o := servertest.Start(t)
	m := lis + "g/one"
	o.Apply(listener("g/one", "member"))
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	rg := newRecorder(t)
	cancel, err := c.Watch(t.Context(), resource.ListenerURL, lis+"g/*", rg.handle)
	if err != nil {
		t.Fatal(err)
	}
	rg.expect(client.Updated, m, "member")
	cancel()
	barrier(t, c, o)
	o.Stop()
	r := newRecorder(t)
	cancel, err = c.Watch(t.Context(), resource.ListenerURL, m, r.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	o.Start()
	r.expect(client.Updated, m, "member")
}
