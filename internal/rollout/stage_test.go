package rollout_test

import (
	"fmt"
	"testing"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// A param= canary's report chooses as the engine serves: a stream with
// TP2 locators (a relay carrying two clients' sets) by each subscription's
// parameter set, keeping the one that matches; a stream whose
// subscriptions go by its node's parameters by those, without repeating
// them per entry.
func TestCanaryByParameterSet(t *testing.T) {
	changes := []store.Change{{Key: resource.Key{Type: resource.ClusterURL, Name: "c", Constraints: "env=prod"}, Op: store.Updated, Version: "5"}}
	typ := func(subs ...protocol.Subscription) []protocol.TypeStatus {
		return []protocol.TypeStatus{{Type: "cds", URL: resource.ClusterURL, Subscriptions: subs, AckedVersion: "5", AckedNonce: "n"}}
	}
	streams := []protocol.StreamStatus{
		{ID: 1, NodeID: "relay", Types: typ(
			protocol.Subscription{Name: "c", Params: map[string]string{"env": "prod"}, Locator: true},
			protocol.Subscription{Name: "c", Params: map[string]string{"env": "test"}, Locator: true},
			protocol.Subscription{Name: "c", Params: map[string]string{"env": "qa"}, Locator: true})},
		{ID: 2, NodeID: "envoy-prod", Params: map[string]string{"env": "prod"}, Types: typ(protocol.Subscription{Name: "c", Params: map[string]string{"env": "prod"}})},
		{ID: 3, NodeID: "envoy-test", Params: map[string]string{"env": "test"}, Types: typ(protocol.Subscription{Name: "c", Params: map[string]string{"env": "test"}})},
	}
	rep := rollout.Status(streams, 5, changes, func(string, string) []*resource.Variant { return nil })
	if len(rep.Entries) != 2 || rep.Entries[1].ParamSets != nil {
		t.Fatalf("the report: %+v (want the relay and envoy-prod, no param sets for a plain subscription)", rep.Entries)
	}
	spec, err := canary.Parse("env=prod")
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.Canary(rep, spec)
	if c.Acked != 2 || len(c.Entries) != 2 || c.Entries[0].Node != "relay" || fmt.Sprint(c.Entries[0].ParamSets) != "[map[env:prod]]" || c.Entries[1].Node != "envoy-prod" {
		t.Errorf("the env=prod canary: %+v", c)
	}
	spec, _ = canary.Parse("env=qa")
	if c := rollout.Canary(rep, spec); len(c.Entries) != 0 {
		t.Errorf("the env=qa canary: %+v", c)
	}
}

// Narrowing a fleet's report to the canary keeps the replicas that did
// not answer: their canary clients' answers are unknown, so the report is
// not done and a baked revision is not promoted while any is listed.
func TestCanaryKeepsUnreachableReplicas(t *testing.T) {
	rep := rollout.Report{Revision: 5, Done: false, Acked: 1,
		Entries:     []rollout.Entry{{Node: "a", State: rollout.Acked}},
		Unreachable: []fleet.Unreachable{{Replica: "10.0.0.9:18001", Error: "connection refused"}}}
	spec, err := canary.Parse("100%")
	if err != nil {
		t.Fatal(err)
	}
	c := rollout.Canary(rep, spec)
	if c.Acked != 1 || c.Done || len(c.Unreachable) != 1 || c.Unreachable[0].Replica != "10.0.0.9:18001" {
		t.Errorf("the 100%% canary of a report with a replica that did not answer: %+v", c)
	}
}
