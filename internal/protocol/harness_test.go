package protocol_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

const wait = 10 * time.Second

// harness is a real protocol server on loopback fed from a db, and a client
// connection to it.
type harness struct {
	t    *testing.T
	db   *db.DB
	srv  *protocol.Server
	conn *grpc.ClientConn
}

func newHarness(t *testing.T, opts ...func(*protocol.Options)) *harness {
	t.Helper()
	d := db.New(db.Hooks{})
	o := protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	ps := protocol.NewServer(d, o)
	_, conn := protocoltest.Serve(t, ps.Register)
	return &harness{t: t, db: d, srv: ps, conn: conn}
}

// docs decodes authoring YAML into variants.
func docs(t *testing.T, src string) []*resource.Variant {
	t.Helper()
	ds, err := resource.Decode("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*resource.Variant, len(ds))
	for i, d := range ds {
		out[i] = d.Variant
	}
	return out
}

var rev int64

// put stores variants in one update, each versioned by the update as a
// store would.
func (h *harness) put(vs ...*resource.Variant) {
	rev++
	stamped := make([]*resource.Variant, len(vs))
	for i, v := range vs {
		stamped[i] = v.WithVersion(store.Version(rev, v.Constraints.Key()))
	}
	h.db.Update(db.Update{Rev: rev, Puts: stamped})
}

func (h *harness) update(u db.Update) {
	rev++
	u.Rev = rev
	for i, v := range u.Puts {
		u.Puts[i] = v.WithVersion(store.Version(rev, v.Constraints.Key()))
	}
	h.db.Update(u)
}

func (h *harness) remove(typeURL string, names ...string) {
	var u db.Update
	for _, n := range names {
		u.ResourceDeletes = append(u.ResourceDeletes, db.Key{Type: typeURL, Name: n})
	}
	h.update(u)
}

func cluster(n string) *resource.Variant {
	return clusterTagged(n, "")
}

func clusterTagged(n, tag string) *resource.Variant {
	return variant(resource.ClusterURL, n, "", fmt.Sprintf(`{"@type": "envoy.config.cluster.v3.Cluster", "name": %q, "alt_stat_name": %q}`, n, tag))
}

func route(n, cons, cluster string) *resource.Variant {
	return variant(resource.RouteURL, n, cons, fmt.Sprintf(`{"@type": "envoy.config.route.v3.RouteConfiguration", "name": %q,
		"virtual_hosts": [{"name": "vh", "domains": ["*"], "routes": [{"match": {"prefix": ""}, "route": {"cluster": %q}}]}]}`, n, cluster))
}

func secret(n string) *resource.Variant {
	return variant(resource.SecretURL, n, "", fmt.Sprintf(`{"@type": "envoy.extensions.transport_sockets.tls.v3.Secret", "name": %q}`, n))
}

func variant(typeURL, n, cons, payload string) *resource.Variant {
	c := ""
	if cons != "" {
		c = fmt.Sprintf(`"constraints": %q, `, cons)
	}
	ds, err := resource.Decode("t.json", []byte(fmt.Sprintf(`{"name": %q, "type": %q, %s"resource": %s}`, n, typeURL, c, payload)))
	if err != nil {
		panic(err)
	}
	return ds[0].Variant
}

func dbUpdate(puts []*resource.Variant, removes [][2]string) db.Update {
	u := db.Update{Puts: puts}
	for _, r := range removes {
		u.ResourceDeletes = append(u.ResourceDeletes, db.Key{Type: r[0], Name: r[1]})
	}
	return u
}

func node(id string, meta map[string]string, features ...string) *corev3.Node {
	return protocoltest.Node(id, meta, features...)
}

func (h *harness) sotw(n *corev3.Node) *protocoltest.SotW {
	return protocoltest.NewSotW(h.t, h.conn, n)
}

func (h *harness) delta(n *corev3.Node) *protocoltest.Delta {
	return protocoltest.NewDelta(h.t, h.conn, n)
}

// putSecret stores a secret, for barriers.
func (h *harness) putSecret(n string) { h.put(secret(n)) }

var (
	sotwNames = protocoltest.SotWNames
	describe  = protocoltest.Describe
)
