package protocol_test

import (
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// A delta client's state, kept by applying every response, always equals
// what its subscriptions cover (docs/protocol.md §2.2–§2.5, TP1 globs, TP2
// variants by node metadata): random puts, variant-set changes, removals,
// subscriptions and unsubscriptions of names, globs and the wildcard.
func TestDeltaClientStateFollowsTheDB(t *testing.T) {
	const g = "xdstp://a/envoy.config.cluster.v3.Cluster/g/*"
	names := []string{"a", "b", "c", "xdstp://a/envoy.config.cluster.v3.Cluster/g/1",
		"xdstp://a/envoy.config.cluster.v3.Cluster/g/2", "xdstp://a/envoy.config.cluster.v3.Cluster/g/deep/3"}
	subs := append([]string{"*", g}, names...)
	sets := [][]string{{""}, {"env=prod"}, {"env=test"}, {"env=prod", "env=test"}}
	params := constraint.Params{"env": "prod"}
	for seed := int64(1); seed <= max(12, modelSeeds()); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			h := newHarness(t)
			c := h.delta(node("n", map[string]string{"env": "prod"}))
			subscribed := map[string]bool{}
			state := map[string]string{}
			covered := func(n string) bool {
				if subscribed[n] || subscribed["*"] {
					return true
				}
				gl, ok := db.InGlob(n)
				return ok && subscribed[gl]
			}
			apply := func(r *discoveryv3.DeltaDiscoveryResponse) {
				for _, res := range r.Resources {
					state[res.Name] = res.Version
				}
				for _, n := range r.RemovedResources {
					delete(state, n)
				}
			}
			// The first request names something, so there is no implicit
			// wildcard.
			c.Sub(resource.ClusterURL, "a")
			subscribed["a"] = true
			var log []string
			for step := range 100 {
				var op string
				switch k := rng.Intn(4); k {
				case 0, 1, 2:
					op = randomChange(h, rng, k, names, sets, step)
				case 3:
					n := subs[rng.Intn(len(subs))]
					if subscribed[n] {
						c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{n}})
						delete(subscribed, n)
						for held := range state {
							if !covered(held) {
								delete(state, held)
							}
						}
						op = "unsubscribe " + n
					} else {
						c.Sub(resource.ClusterURL, n)
						subscribed[n] = true
						op = "subscribe " + n
					}
				}
				log = append(log, op)
				// Barrier: everything before it has arrived.
				bn := fmt.Sprintf("barrier-%d", step)
				h.putSecret(bn)
				c.Sub(resource.SecretURL, bn)
				for done := false; !done; {
					r := c.Recv()
					if r.TypeUrl == resource.SecretURL {
						done = len(r.Resources) == 1 && r.Resources[0].Name == bn
						continue
					}
					apply(r)
				}
				want := map[string]string{}
				h.db.Read(func(rd *db.Reader) {
					for _, n := range names {
						if v := rd.Get(resource.ClusterURL, n, params); v != nil && covered(n) {
							want[n] = v.Version
						}
					}
				})
				if fmt.Sprint(sorted(want)) != fmt.Sprint(sorted(state)) {
					t.Fatalf("after\n  %s\nthe client holds %v\nwant %v", strings.Join(log, "\n  "), sorted(state), sorted(want))
				}
			}
		})
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"@"+v)
	}
	sort.Strings(out)
	return out
}

// A SotW client of a full-state type (CDS) always holds what its
// subscriptions cover (docs/protocol.md §1.5–§1.8): random puts, variant-set
// changes, removals and name-list changes, the wildcard included.
func TestSotWClientStateFollowsTheDB(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	subs := append([]string{"*"}, names...)
	sets := [][]string{{""}, {"env=prod"}, {"env=test"}, {"env=prod", "env=test"}}
	params := constraint.Params{"env": "prod"}
	for seed := int64(1); seed <= max(10, modelSeeds()); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			h := newHarness(t)
			c := h.sotw(node("n", map[string]string{"env": "prod"}))
			subscribed := map[string]bool{"a": true}
			list := func() []string {
				var out []string
				for n := range subscribed {
					out = append(out, n)
				}
				sort.Strings(out)
				return out
			}
			state := map[string]string{}
			var nonce, version string
			c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list()})
			var log []string
			for step := range 100 {
				var op string
				switch k := rng.Intn(4); k {
				case 0, 1, 2:
					op = randomChange(h, rng, k, names, sets, step)
				case 3:
					n := subs[rng.Intn(len(subs))]
					if subscribed[n] {
						delete(subscribed, n)
						op = "unsubscribe " + n
					} else {
						subscribed[n] = true
						op = "subscribe " + n
					}
					c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list(), ResponseNonce: nonce, VersionInfo: version})
				}
				log = append(log, op)
				// Two barriers: make-before-break sends a round's cluster
				// removals after the round's other responses, the first
				// barrier's included (docs/protocol.md §1.9).
				for round := range 2 {
					bn := fmt.Sprintf("barrier-%d-%d", step, round)
					h.putSecret(bn)
					c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretURL, ResourceNames: []string{bn}})
					for {
						r := c.Recv()
						if r.TypeUrl == resource.SecretURL {
							if len(r.Resources) == 1 && protocolNames(t, r)[0] == bn {
								break
							}
							continue
						}
						state = map[string]string{}
						for _, n := range protocolNames(t, r) {
							state[n] = r.VersionInfo
						}
						nonce, version = r.Nonce, r.VersionInfo
						c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list(), ResponseNonce: nonce, VersionInfo: version})
					}
				}
				want := map[string]bool{}
				h.db.Read(func(rd *db.Reader) {
					for _, n := range names {
						if v := rd.Get(resource.ClusterURL, n, params); v != nil && (subscribed[n] || subscribed["*"]) {
							want[n] = true
						}
					}
				})
				var got, exp []string
				for n := range state {
					got = append(got, n)
				}
				for n := range want {
					exp = append(exp, n)
				}
				sort.Strings(got)
				sort.Strings(exp)
				if fmt.Sprint(got) != fmt.Sprint(exp) {
					t.Fatalf("after\n  %s\nthe client holds %v\nwant %v", strings.Join(log, "\n  "), got, exp)
				}
			}
		})
	}
}

func protocolNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	return sotwNames(t, r)
}

// randomChange changes one of names in h's db: k 0 or 1 puts a random set
// of variants (a variant-set change replaces the old set), k 2 removes it.
// It returns what it did, for the log.
func randomChange(h *harness, rng *rand.Rand, k int, names []string, sets [][]string, step int) string {
	n := names[rng.Intn(len(names))]
	if k == 2 {
		h.remove(resource.ClusterURL, n)
		return "remove " + n
	}
	set := sets[rng.Intn(len(sets))]
	putVariantSet(h, n, set, step)
	return fmt.Sprintf("put %s %v", n, set)
}

// putVariantSet replaces cluster n's variants by one per constraints of
// set, told apart from earlier ones by step.
func putVariantSet(h *harness, n string, set []string, step int) {
	u := db.Update{ResourceDeletes: []db.Key{{Type: resource.ClusterURL, Name: n}}}
	for _, cons := range set {
		u.Puts = append(u.Puts, variant(resource.ClusterURL, n, cons,
			fmt.Sprintf(`{"@type": "envoy.config.cluster.v3.Cluster", "name": %q, "alt_stat_name": "%d"}`, n, step)))
	}
	h.update(u)
}

// modelSeeds is XDSD_MODEL_SEEDS, for a deeper search than the model
// tests' own seeds (as in the client's model test); 0 when unset.
func modelSeeds() int64 {
	n, _ := strconv.Atoi(os.Getenv("XDSD_MODEL_SEEDS"))
	return int64(n)
}
