package bolt

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// Log entries and revision records of format 3 read back as written, and
// a damaged one (cut short anywhere, or with any byte changed) is refused
// or read as something else, never a panic.
func TestKeyListsReadBackAndSurviveDamage(t *testing.T) {
	keys := []resource.Key{
		{Type: resource.ClusterURL, Name: "a"},
		{Type: resource.RouteURL, Name: "r", Constraints: "env=prod && version=v2"},
		{Type: resource.ClusterURL, Name: "xdstp://auth/envoy.config.cluster.v3.Cluster/b"},
		{Type: resource.ListenerURL, Name: ""},
	}
	log := encodeKeys(keys)
	if got, err := decodeKeys(log); err != nil || !reflect.DeepEqual(got, keys) {
		t.Fatalf("log entry read back as %v, %v", got, err)
	}
	if got, err := decodeKeys(encodeKeys(nil)); err != nil || len(got) != 0 {
		t.Errorf("empty log entry: %v, %v", got, err)
	}
	prev := storetest.Cluster("a", "", "old")
	p := store.Plan{Puts: []*resource.Variant{storetest.Cluster("a", "", "new"), storetest.Route("r", "env=prod && version=v2", "x")},
		Deletes: []resource.Key{{Type: resource.ClusterURL, Name: "gone"}},
		Prev:    map[resource.Key]*resource.Variant{prev.Key(): prev}}
	rec, err := encodeRevision(time.Unix(1700000000, 0), store.Audit{Who: "alice"}, p)
	if err != nil {
		t.Fatal(err)
	}
	if cap(log) != len(log) || cap(rec) != len(rec)+4 {
		t.Errorf("log entry of %d bytes in %d, revision record of %d in %d: want them allocated at their size (the record with room for its checksum)", len(log), cap(log), len(rec), cap(rec))
	}
	r, err := decodeRevision(7, rec)
	if err != nil || len(r.Changes) != 3 || r.Audit.Who != "alice" {
		t.Fatalf("revision read back as %+v, %v", r, err)
	}
	ops := map[string]store.Op{}
	for _, c := range r.Changes {
		ops[c.Key.Name] = c.Op
	}
	if ops["a"] != store.Updated || ops["r"] != store.Created || ops["gone"] != store.Deleted {
		t.Errorf("operations: %v", ops)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, b := range [][]byte{log, rec} {
		for n := range b {
			decodeKeys(b[:n])
			decodeRevision(7, b[:n])
		}
		for range 2000 {
			d := append([]byte(nil), b...)
			d[rnd.IntN(len(d))] = byte(rnd.Uint32())
			decodeKeys(d)
			decodeRevision(7, d)
		}
	}
}
