package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// Records are allocated at their exact size, whatever fields they hold,
// and read back as they were written.
func TestRecordsAreSizedExactly(t *testing.T) {
	ttl := storetest.Cluster("t", "", "x")
	ttl.TTL = 90 * time.Second
	redirect := resource.NewVariant(resource.ForURL(resource.ClusterURL), "r", constraint.Constraints{}, "", resource.LocatorURL, []byte{1, 2, 3})
	for _, v := range []*resource.Variant{
		storetest.Cluster("a", "", "x").WithVersion("7"),
		storetest.Route("r", "env=prod && version=v2", "p").WithVersion("12-0a1b2c3d"),
		storetest.Cluster("d", "", "x").WithDoNotCache(true),
		ttl, redirect,
		resource.NewVariant(resource.ForURL(resource.ClusterURL), "empty", constraint.Constraints{}, "1", "", nil),
	} {
		for _, ref := range [][]byte{nil, {0, 0, 0, 0, 0, 0, 0, 9}} {
			var rec []byte
			var err error
			if ref == nil {
				rec, err = store.EncodeRecord(v)
			} else {
				rec, err = store.EncodeHead(v, ref)
			}
			if err != nil {
				t.Fatal(err)
			}
			if cap(rec) != len(rec) {
				t.Errorf("%s (body apart: %v): record of %d bytes in %d", v.Key(), ref != nil, len(rec), cap(rec))
			}
			got, err := store.DecodeHead(v.Key(), rec, func([]byte) []byte { return v.Body() })
			if err != nil {
				t.Fatalf("%s: %v", v.Key(), err)
			}
			if got.Version != v.Version || got.PayloadURL != v.PayloadURL || got.TTL != v.TTL || got.DoNotCache != v.DoNotCache ||
				!got.Constraints.Equal(v.Constraints) || !bytes.Equal(got.Body(), v.Body()) {
				t.Errorf("%s read back as %+v", v.Key(), got)
			}
		}
	}
}
