// Package canary says which streams are in the canary of a staged
// revision (docs/rollouts.md): a SPEC of `xdsd apply --canary`, parsed,
// and matched against a stream's node id and a subscription's TP2
// parameter set. The protocol engine asks it for every watch it answers
// while a revision is staged; the admin API and the CLI parse with it, so
// a SPEC means the same wherever it is read.
package canary

import (
	"fmt"
	"hash/fnv"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/xdsd/xdsd/constraint"
)

// Spec is a parsed canary SPEC: exactly one of its forms is set.
type Spec struct {
	// Percent, from 1 to 100, chooses the streams whose node id hashes
	// into that share (Bucket).
	Percent int
	// Node is a glob (path.Match) a stream's node id must match.
	Node string
	// Params are parameter values a subscription's parameter set must
	// all hold.
	Params constraint.Params
}

// Syntax is what a SPEC may be, for error messages.
const Syntax = "N% (1 to 100, by a hash of the node id), param=value[,param=value…] (subscriptions with those TP2 parameters) or node=GLOB (node ids matching GLOB)"

// Parse reads a SPEC.
func Parse(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Spec{}, fmt.Errorf("empty canary SPEC: want %s", Syntax)
	case strings.HasSuffix(s, "%"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil || n < 1 || n > 100 {
			return Spec{}, fmt.Errorf("canary %q: want a whole percentage from 1%% to 100%% (for example 25%%)", s)
		}
		return Spec{Percent: n}, nil
	case strings.HasPrefix(s, "node="):
		g := strings.TrimPrefix(s, "node=")
		if g == "" {
			return Spec{}, fmt.Errorf("canary %q: node= needs a glob of node ids (for example node=edge-*)", s)
		}
		if _, err := path.Match(g, ""); err != nil {
			return Spec{}, fmt.Errorf("canary %q: the node glob is malformed (%v); write it as path.Match does, for example node=edge-*", s, err)
		}
		return Spec{Node: g}, nil
	}
	p := constraint.Params{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return Spec{}, fmt.Errorf("canary %q: %q is not param=value; want %s", s, kv, Syntax)
		}
		if _, dup := p[k]; dup {
			return Spec{}, fmt.Errorf("canary %q: parameter %q is given twice", s, k)
		}
		p[k] = v
	}
	return Spec{Params: p}, nil
}

// String is the SPEC as Parse reads it.
func (s Spec) String() string {
	switch {
	case s.Percent > 0:
		return strconv.Itoa(s.Percent) + "%"
	case s.Node != "":
		return "node=" + s.Node
	}
	keys := make([]string, 0, len(s.Params))
	for k := range s.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s.Params[k]
	}
	return strings.Join(parts, ",")
}

// IsZero reports whether s is no SPEC at all.
func (s Spec) IsZero() bool { return s.Percent == 0 && s.Node == "" && len(s.Params) == 0 }

// PerNode reports whether the choice depends on the node id only (N%,
// node=), not on a subscription's parameters: then a stream is in or out
// as a whole.
func (s Spec) PerNode() bool { return s.Percent > 0 || s.Node != "" }

// Bucket is where a node id falls, from 0 to 99: FNV-1a (32 bits) of the
// id, modulo 100. It depends on the id alone, so a client stays in or out
// across reconnects and across replicas, and clients sharing an id go
// together.
func Bucket(nodeID string) int {
	h := fnv.New32a()
	h.Write([]byte(nodeID))
	return int(h.Sum32() % 100)
}

// Match reports whether a stream with node id node, answering a
// subscription with parameter set params, is in the canary. A stream
// without a node id is never in a canary of N% or node=: nothing would
// keep it in or out from one connection to the next.
func (s Spec) Match(node string, params constraint.Params) bool {
	switch {
	case s.Percent > 0:
		return node != "" && Bucket(node) < s.Percent
	case s.Node != "":
		ok, _ := path.Match(s.Node, node)
		return node != "" && ok
	case len(s.Params) > 0:
		for k, v := range s.Params {
			if got, ok := params[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	return false
}
