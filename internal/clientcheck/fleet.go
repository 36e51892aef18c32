package clientcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/refs"
)

// Group is a set of clients checked alike: one agent (the client
// software: envoy, grpc-go, grpc-java, grpc-js, grpc-cpp, xdsd, other)
// with one parameter set, as the fleet index counts them, or as an
// operator declares them (--fleet).
type Group struct {
	Agent  string            `json:"agent"`
	Params constraint.Params `json:"params,omitempty"`
	// Count is how many connected clients the group has; 0 for one only
	// declared.
	Count int `json:"count"`
	// Samples are some of their node ids.
	Samples []string `json:"samples,omitempty"`
	// Declared says an operator declared such clients (--fleet).
	Declared bool `json:"declared,omitempty"`
}

// RuleSetOf is the rule set an agent's clients are checked with: every
// grpc-* agent is checked as gRPC; agents that are neither Envoy nor gRPC
// (a relay, another client) have none, though the references they
// follow are checked for them.
func RuleSetOf(agent string) RuleSet {
	switch {
	case agent == "envoy":
		return Envoy
	case agent == "grpc" || strings.HasPrefix(agent, "grpc-"):
		return GRPC
	}
	return ""
}

// maxSamples bounds the node ids a merged group keeps.
const maxSamples = 3

// NewFleet returns a checker for the clients of a fleet: the groups
// connected and declared. With c Auto, each group is checked with its
// agent's rule set; with Envoy or GRPC, every group with that one. With
// no group (none connected, none declared), Auto runs both rule sets:
// Envoy's findings are errors, as with the default before Auto, and
// gRPC's warnings (a cluster written without a type is STATIC, which
// Envoy takes and gRPC does not: refusing it for clients nobody has would
// refuse most batches); references that dangle are warnings, a refusal
// needing a client that has the parameters.
func NewFleet(c RuleSet, groups []Group) *Checker {
	k := &Checker{asked: c, refPos: map[*refs.Entry][]refAt{}, maxFound: MaxFindings}
	k.groups = mergeGroups(groups)
	switch {
	case c != Auto:
		k.rules = []RuleSet{c}
	case k.groups == nil:
		k.rules = []RuleSet{Envoy, GRPC}
	default:
		for _, rs := range []RuleSet{Envoy, GRPC} {
			for _, g := range k.groups {
				if RuleSetOf(g.Agent) == rs {
					k.rules = append(k.rules, rs)
					break
				}
			}
		}
	}
	return k
}

// mergeGroups merges the groups of one agent and parameter set (a group
// both connected and declared, say); nil when there are none.
func mergeGroups(groups []Group) []Group {
	var out []Group
	at := map[string]int{}
	for _, g := range groups {
		key := g.Agent + "\x00" + g.Params.Key()
		i, ok := at[key]
		if !ok {
			at[key] = len(out)
			g.Samples = append([]string(nil), g.Samples[:min(len(g.Samples), maxSamples)]...)
			out = append(out, g)
			continue
		}
		m := &out[i]
		m.Count += g.Count
		m.Declared = m.Declared || g.Declared
		for _, s := range g.Samples {
			if len(m.Samples) < maxSamples {
				m.Samples = append(m.Samples, s)
			}
		}
	}
	return out
}

// Groups are the fleet's groups the checker checks for; nil when no
// fleet is known.
func (k *Checker) Groups() []Group { return k.groups }

// Rules are the rule sets the checker runs.
func (k *Checker) Rules() []RuleSet { return k.rules }

// runs reports whether the checker runs a rule set.
func (k *Checker) runs(c RuleSet) bool {
	for _, r := range k.rules {
		if r == c {
			return true
		}
	}
	return false
}

// ruleOf is the rule set a group is checked with.
func (k *Checker) ruleOf(g Group) RuleSet {
	if k.asked != Auto {
		return k.asked
	}
	return RuleSetOf(g.Agent)
}

// Describe names who the checker checks for, in a refusal: "Envoy",
// "gRPC", "the connected or declared clients" (Auto without a fleet
// refuses only for Envoy).
func (k *Checker) Describe() string {
	switch {
	case k.asked != Auto:
		return k.asked.String()
	case k.groups == nil:
		return "Envoy"
	}
	return "the connected or declared clients"
}

// describeGroups reads "12 connected grpc-go clients with env=test,
// version=v3; declared envoy clients with no env": the groups, their
// parameters over keys (a key left out is unset), those alike merged.
func describeGroups(gs []Group, keys []string) string {
	sort.Strings(keys)
	type kind struct {
		agent, params string
		declared      bool
	}
	var order []kind
	counts := map[kind]int{}
	for _, g := range gs {
		kd := kind{g.Agent, describeParams(g.Params, keys), g.Count == 0}
		if _, ok := counts[kd]; !ok {
			order = append(order, kd)
		}
		counts[kd] += g.Count
	}
	const shown = 4
	var parts []string
	for i, kd := range order {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more groups", len(order)-shown))
			break
		}
		agent := kd.agent
		if agent == "" {
			agent = "other"
		}
		var s string
		switch n := counts[kd]; {
		case kd.declared:
			s = "declared " + agent + " clients"
		case n == 1:
			s = "1 connected " + agent + " client"
		default:
			s = fmt.Sprintf("%d connected %s clients", n, agent)
		}
		if kd.params != "" {
			s += " with " + kd.params
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// describeParams reads "env=test, version=v3" or "no env": p over keys,
// each key once.
func describeParams(p constraint.Params, keys []string) string {
	var parts []string
	var last string
	for _, k := range keys {
		if k == last {
			continue
		}
		last = k
		if v, ok := p[k]; ok {
			parts = append(parts, constraint.Params{k: v}.Key())
		} else {
			parts = append(parts, "no "+k)
		}
	}
	return strings.Join(parts, ", ")
}

// agree is verb as describeGroups' text takes it: "gets" after "1
// connected grpc-go client", "get" after anything else.
func agree(gs []Group, verb string) string {
	if len(gs) == 1 && gs[0].Count == 1 {
		return verb + "s"
	}
	return verb
}
