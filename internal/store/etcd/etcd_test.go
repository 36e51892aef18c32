package etcd_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/store/etcd/etcdtest"
	"github.com/xdsd/xdsd/internal/store/storetest"
)

func TestMain(m *testing.M) {
	if crashChildMain() {
		return
	}
	goleak.VerifyTestMain(m)
}

var prefixes atomic.Int64

// open opens a store on a fresh prefix of cluster c.
func open(t *testing.T, c *etcdtest.Cluster, prefix string) *etcd.Store {
	t.Helper()
	s, err := etcd.Open(context.Background(), etcd.Options{Endpoints: c.Endpoints(), Prefix: prefix})
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
