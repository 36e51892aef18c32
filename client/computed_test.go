package client_test

import (
	"strings"
	"testing"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/servertest"
	"github.com/xdsd/xdsd/resource"
)

// TP1 computed context parameters: a listener authored with
// xds.resource.vip in its xdstp name (on-demand by VIP) answers a watch
// that adds the computed attribute to the configured name — over SotW and
// delta — and (delta) only one with that value; a configured name may not carry
// xds. parameters itself, nor may a computed one be outside
// xds.resource.*.
func TestComputedResourceParameters(t *testing.T) {
	for _, sotw := range []bool{false, true} {
		t.Run(map[bool]string{false: "delta", true: "sotw"}[sotw], func(t *testing.T) {
			o := servertest.Start(t)
			o.Apply(listener("foo?bar=baz&xds.resource.vip=96.54.3.1", "by-vip") + "---\n" + listener("other", "x"))
			c := newClient(t, bs{servers: []string{o.Addr}, sotw: sotw, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
			r := newRecorder(t)
			cancel, err := c.WatchComputed(t.Context(), resource.ListenerURL, lis+"foo?bar=baz", map[string]string{"xds.resource.vip": "96.54.3.1"}, r.handle)
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			r.expect(client.Updated, lis+"foo?bar=baz&xds.resource.vip=96.54.3.1", "by-vip")

			if sotw {
				return // a SotW server cannot say a listener does not exist but by leaving it out of the next full state
			}
			other := newRecorder(t)
			cancel2, err := c.WatchComputed(t.Context(), resource.ListenerURL, lis+"foo?bar=baz", map[string]string{"xds.resource.vip": "10.0.0.1"}, other.handle)
			if err != nil {
				t.Fatal(err)
			}
			defer cancel2()
			other.expect(client.DoesNotExist, lis+"foo?bar=baz&xds.resource.vip=10.0.0.1", "")
		})
	}
}

func TestComputedParametersRefused(t *testing.T) {
	o := servertest.Start(t)
	c := newClient(t, bs{servers: []string{o.Addr}, authorities: map[string][]string{"a": nil}}.build(t), client.Options{})
	nop := func(client.Event) {}
	for _, tc := range []struct {
		name     string
		computed map[string]string
		want     string
	}{
		{lis + "foo?xds.resource.vip=1", nil, `context parameter "xds.resource.vip" is in the reserved xds. namespace`},
		{lis + "foo?XDS.node.id=n", nil, `context parameter "XDS.node.id" is in the reserved xds. namespace`},
		{lis + "foo", map[string]string{"xds.node.id": "n"}, `computed context parameter "xds.node.id": want a key xds.resource.<attribute>`},
		{lis + "foo", map[string]string{"vip": "1"}, `computed context parameter "vip": want a key xds.resource.<attribute>`},
		{"legacy", map[string]string{"xds.resource.vip": "1"}, "computed context parameters need an xdstp:// name"},
	} {
		var err error
		if tc.computed == nil {
			_, err = c.Watch(t.Context(), resource.ListenerURL, tc.name, nop)
		} else {
			_, err = c.WatchComputed(t.Context(), resource.ListenerURL, tc.name, tc.computed, nop)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want %q", tc.name, tc.computed, err, tc.want)
		}
	}
}
