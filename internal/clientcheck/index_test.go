package clientcheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// families are the sets of variants a random resource is given: each
// lets at most one variant match a parameter set, as a store holds them.
var families = [][]string{{""}, {"env=prod", "env!=prod"}, {"env=prod"}, {"zone=a", "zone=b"}, {"exists(env)"}}

// randomResource writes the variants of one resource of a small mesh
// whose names collide: listeners binding one of three ports and naming a
// route, routes naming clusters, clusters (some aggregate) naming their
// endpoints, and endpoints; some references lead nowhere.
func randomResource(rng *rand.Rand, kind, i int) string {
	var b strings.Builder
	for _, cons := range families[rng.IntN(len(families))] {
		var body string
		switch kind {
		case 0:
			body = fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l%d
address: {socket_address: {address: 0.0.0.0, port_value: %d}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: s
      rds: {route_config_name: r%d, config_source: {ads: {}}}
      http_filters: [%s]
`, i, 80+rng.IntN(3), rng.IntN(6), router)
		case 1:
			body = fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: r%d\nvirtual_hosts: [{name: v, domains: [\"*\"], routes: [{match: {prefix: /a}, route: {cluster: c%d}}, {match: {prefix: /}, route: {cluster: c%d}}]}]\n", i, rng.IntN(8), rng.IntN(8))
		case 2:
			if rng.IntN(4) == 0 {
				body = fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c%d\nlb_policy: CLUSTER_PROVIDED\ncluster_type:\n  name: envoy.clusters.aggregate\n  typed_config: {\"@type\": type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig, clusters: [c%d, c%d]}\n", i, rng.IntN(8), rng.IntN(8))
			} else {
				body = fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c%d\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}, service_name: c%d}\n", i, rng.IntN(8))
			}
		default:
			body = fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment\ncluster_name: c%d\n", i)
		}
		b.WriteString("---\n")
		if cons != "" {
			b.WriteString("constraints: " + cons + "\nresource:\n" + indent(body))
		} else {
			b.WriteString(body)
		}
	}
	return b.String()
}

// A checker on an index (On) kept through puts and deletes finds what a
// checker given every stored variant (AddStored) finds, finding for
// finding and in the same order, for every rule set and fleet, batch
// after batch of a random mesh.
func TestIndexFindsAsAddStored(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 4))
	fleets := []struct {
		c      RuleSet
		groups []Group
	}{
		{Envoy, nil},
		{GRPC, nil},
		{Auto, nil},
		{Auto, []Group{{Agent: "envoy", Params: constraint.Params{"env": "prod"}, Count: 2}, {Agent: "grpc-go", Count: 1}, {Agent: "envoy", Params: constraint.Params{"zone": "b"}, Declared: true}}},
		{GRPC, []Group{{Agent: "grpc-java", Params: constraint.Params{"env": "dev", "zone": "a"}, Count: 5}}},
	}
	stored := map[resource.Key]*resource.Document{}
	x := NewIndex()
	decode := func(src string) []*resource.Document {
		docs, err := resource.Decode("t.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		return docs
	}
	findings := 0
	for step := range 150 {
		// A batch of a few resources, each with its variants.
		var src strings.Builder
		given := map[[2]int]bool{}
		for range 1 + rng.IntN(4) {
			r := [2]int{rng.IntN(4), rng.IntN(8)}
			if given[r] {
				continue
			}
			given[r] = true
			src.WriteString(randomResource(rng, r[0], r[1]))
		}
		batch := decode(src.String())
		keys := make([]resource.Key, 0, len(stored))
		for k := range stored {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, store.CompareKeys)
		for _, f := range fleets {
			whole := NewFleet(f.c, f.groups)
			near := NewFleet(f.c, f.groups)
			for _, d := range batch {
				whole.Add(d)
				near.Add(d)
			}
			for _, k := range keys {
				whole.AddStored(Summarize(stored[k].Variant, stored[k].Message))
			}
			near.On(x)
			want, got := describe(whole.Findings()), describe(near.Findings())
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, %s %v, batch:\n%s\nstored: %d variants\nfindings on the index:\n%s\nwant:\n%s", step, f.c, f.groups, src.String(), len(stored), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			findings += len(want)
		}
		// Apply it, or sometimes delete its resources instead.
		del := rng.IntN(5) == 0
		for _, d := range batch {
			for k := range stored {
				if k.Type == d.Variant.Type.URL && k.Name == d.Variant.Name {
					delete(stored, k)
					x.Delete(k)
				}
			}
		}
		if !del {
			for _, d := range batch {
				stored[d.Variant.Key()] = d
				x.Put(d.Variant, d.Message)
			}
		}
		if x.Len() != len(stored) {
			t.Fatalf("step %d: the index holds %d variants, the store %d", step, x.Len(), len(stored))
		}
	}
	if findings < 100 {
		t.Errorf("only %d findings in all: the mesh checks too little", findings)
	}
}

// describe is what a finding says, and to whom.
func describe(fs []Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = fmt.Sprintf("%s %d %v", f.String(), f.Severity, f.Groups)
	}
	return out
}
