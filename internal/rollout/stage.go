package rollout

import (
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/canary"
)

// Stage is where a staged revision stands (docs/rollouts.md), beside its
// rollout: GET /v1/rollout, xdsd apply --canary --wait and status show it.
type Stage struct {
	// State is staged, promoted or aborted (store.StateStaged…).
	State       string `json:"state"`
	Canary      string `json:"canary"`
	Bake        string `json:"bake,omitempty"`
	AbortOnNack bool   `json:"abort_on_nack,omitempty"`
	// BakeEnds is when the server may promote it by itself.
	BakeEnds *time.Time `json:"bake_ends,omitempty"`
	// ClosedBy is the revision that promoted or aborted it; Via says what
	// made that revision ("rollout abort 6" for a person's command,
	// "server: rollout abort 6" for the server's), and Reason why, when
	// the server did. Who and From are that revision's audit: the
	// identity that wrote it (empty when unidentified) and its address,
	// so that a person's abort can be traced to them.
	ClosedBy int64  `json:"closed_by,omitempty"`
	Via      string `json:"via,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Who      string `json:"who,omitempty"`
	From     string `json:"from,omitempty"`
	// HeldOff, while the revision is staged and its bake is over, says
	// why the server answering has not promoted it: a canary client
	// NACKed it, a replica did not answer about its canary, or no canary
	// client ACKed it yet.
	HeldOff string `json:"held_off,omitempty"`
}

// Canary returns rep with only the entries of streams in the canary of
// spec, recounted. A stream is in it by its node id (N%, node=), or, for
// param=, as the engine chooses: by the parameter set of each of its
// subscriptions to what changed (Entry.ParamSets), so that a relay
// carrying many clients' sets on one stream is in it when one of them
// matches, and its entry then keeps only the sets that match. A stream
// with no such set is chosen by its node's parameters. The replicas
// that did not answer (Unreachable) are kept: rep is not done while any
// is listed.
func Canary(rep Report, spec canary.Spec) Report {
	// The replicas that did not answer stay listed: their canary
	// clients' answers are unknown, which holds a bake's promote off
	// (origin: fleetHold) and keeps a wait from being done.
	out := Report{Revision: rep.Revision, Entries: []Entry{}, Stage: rep.Stage, Unreachable: rep.Unreachable}
	for _, e := range rep.Entries {
		if spec.PerNode() || len(e.ParamSets) == 0 {
			if !spec.Match(e.Node, constraint.Params(e.Params)) {
				continue
			}
		} else {
			var in []map[string]string
			for _, p := range e.ParamSets {
				if spec.Match(e.Node, constraint.Params(p)) {
					in = append(in, p)
				}
			}
			if len(in) == 0 {
				continue
			}
			e.ParamSets = in
		}
		out.Entries = append(out.Entries, e)
		switch e.State {
		case Acked:
			out.Acked++
		case Nacked:
			out.Nacked++
		case Unserved:
			out.Unserved++
		default:
			out.Pending++
		}
	}
	out.Done = out.Pending == 0 && len(out.Unreachable) == 0
	return out
}
