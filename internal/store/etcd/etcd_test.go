package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
)

func TestMain(m *testing.M) {
	if crashChildMain() {
		return
	}
	etcdtest.Prebuild()
	goleak.VerifyTestMain(m)
}

var prefixes atomic.Int64

// testRequestTimeout bounds each etcd request of the stores the tests
// open, except in TestUnreachable, which is about that bound. The default
// (5 s, and 20 s for the initial load) is for a serving replica; on a
// loaded test machine, with -race, loading a few 100,000-variant batches
// or prewrite one can take longer without anything being wrong: a test
// failing on that asserts nothing.
const testRequestTimeout = 2 * time.Minute

// open opens a store on a fresh prefix of cluster c.
func open(t *testing.T, c *etcdtest.Cluster, prefix string) *etcd.Store {
	t.Helper()
	s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: prefix, RequestTimeout: testRequestTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func freshPrefix() string { return fmt.Sprintf("/t%d/", prefixes.Add(1)) }

func TestConformance(t *testing.T) {
	c := etcdtest.Start(t, 1)
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, c, freshPrefix()) })
}

func TestParseURL(t *testing.T) {
	o, err := etcd.ParseURL("etcd://127.0.0.1:2379,127.0.0.1:22379/team/xdsd/")
	if err != nil || len(o.Endpoints) != 2 || o.Endpoints[1] != "127.0.0.1:22379" || o.Prefix != "/team/xdsd/" {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := etcd.ParseURL("etcd://h:1"); err != nil || o.Prefix != "" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, bad := range []string{"etcd://", "etcd://host", "etcd://h:1,,h:2", "http://h:1"} {
		if _, err := etcd.ParseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
