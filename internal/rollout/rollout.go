// Package rollout answers "did every client take the change?" for one
// store revision: which connected streams the revision's changes concern,
// and whether each has ACKed or NACKed a version carrying them. It reads
// the protocol engine's view of its streams (protocol.StreamStatus) and the
// store's record of the revision (store.Revision); xdsd apply --wait and
// GET /v1/rollout use it.
//
// A stream is concerned by a change to variant K (type, name,
// constraints) when, for K's type, it subscribes to K's name — by that
// name, a wildcard, or the glob collection holding it (TP1) — with
// dynamic parameters that K's constraints match (TP2: only the clients
// that select K are told about it), or when it holds K itself (it had the
// variant that changed or went away). For on-demand virtual hosts
// (VHDS), subscribed by alias, what a stream holds decides. A concerned
// stream has taken the change once it ACKs a version at or past the
// revision (versions carry the store revision, docs/protocol.md §2.4);
// a NACK of such a version is reported with its reason. A stream that
// connects while a rollout is followed is concerned like any other.
package rollout

import (
	"sort"
	"strconv"
	"strings"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// The states of a concerned stream.
const (
	Acked   = "acked"
	Nacked  = "nacked"
	Pending = "pending" // not answered yet
	// Unserved is a SotW stream left with no variant of a route
	// configuration or endpoints it subscribes to: SotW has no word for
	// that (docs/protocol.md §2.8), so nothing is sent and nothing is
	// waited for; the client keeps what it had.
	Unserved = "unserved"
)

// Entry is one concerned stream's answer for one type.
type Entry struct {
	ID      uint64            `json:"id"`
	Node    string            `json:"node_id"`
	Address string            `json:"address"`
	Params  map[string]string `json:"node_params,omitempty"`
	Type    string            `json:"type"`
	State   string            `json:"state"`
	Version string            `json:"version,omitempty"` // ACKed or NACKed
	Error   string            `json:"error,omitempty"`   // the NACK's reason
	Changed []string          `json:"changed"`           // the changed names it is concerned by
	// NoVariant lists the changed names the stream subscribes to and
	// holds no variant of: after the change, nothing matches it (it was
	// told the resource does not exist).
	NoVariant []string `json:"no_variant,omitempty"`
	Identity  string   `json:"identity,omitempty"`
	// Agent is the client software (fleet.AgentOf), Replica the server
	// replica the stream is connected to ("" for a lone server).
	Agent   string `json:"agent,omitempty"`
	Replica string `json:"replica,omitempty"`
	// ParamSets are the parameter sets of the stream's subscriptions to
	// the changed names (a locator's, or its node's), each once, when one
	// of them is a TP2 locator's: a relay carries many clients' sets on
	// one stream. A param= canary chooses by them (Canary), else by
	// Params.
	ParamSets []map[string]string `json:"param_sets,omitempty"`
}

// Report is the state of a revision's rollout.
type Report struct {
	Revision int64 `json:"revision"`
	// Done means no concerned stream is pending.
	Done    bool `json:"done"`
	Acked   int  `json:"acked"`
	Nacked  int  `json:"nacked"`
	Pending int  `json:"pending"`
	// Unserved counts streams in state Unserved.
	Unserved int     `json:"unserved,omitempty"`
	Entries  []Entry `json:"clients"`
	// Stage, for a revision applied with --canary, is where it stands;
	// the counts and entries are then the canary's streams only.
	Stage *Stage `json:"stage,omitempty"`
	// Unreachable are the replicas that did not answer (docs/fleet.md):
	// whether their clients took the revision is unknown, so the
	// rollout is not done while any is listed.
	Unreachable []fleet.Unreachable `json:"unreachable_replicas,omitempty"`
}

// Lookup returns the current variants of a resource.
type Lookup func(typeURL, name string) []*resource.Variant

// Status computes the rollout of revision rev, whose changes are
// changes, over the streams clients — those the fleet index reports
// subscribed to the changed names (protocol.Server.Concerned of Names),
// or every stream; now gives the current variants.
func Status(clients []protocol.StreamStatus, rev int64, changes []store.Change, now Lookup) Report {
	byType := map[string][]store.Change{}
	for _, c := range changes {
		byType[c.Key.Type] = append(byType[c.Key.Type], c)
	}
	rep := Report{Revision: rev, Entries: []Entry{}}
	for _, c := range clients {
		for _, t := range c.Types {
			ch := byType[t.URL]
			if len(ch) == 0 {
				continue
			}
			names := concerned(t, ch)
			if len(names) == 0 {
				continue
			}
			e := Entry{ID: c.ID, Node: c.NodeID, Address: c.Address, Params: c.Params, Type: t.Type, Changed: names, NoVariant: bare(t, names, now),
				Identity: c.Identity, Agent: c.Agent, Replica: c.Replica, ParamSets: paramSets(t, ch)}
			sotwPartial := !strings.Contains(c.Kind, "delta") && !resource.ForURL(t.URL).FullState
			switch {
			case AtLeast(t.AckedVersion, rev) && t.AckedNonce != "":
				e.State, e.Version = Acked, t.AckedVersion
				rep.Acked++
			case t.LastNack != nil && AtLeast(t.LastNack.Version, rev):
				e.State, e.Version, e.Error = Nacked, t.LastNack.Version, t.LastNack.Error
				rep.Nacked++
			case sotwPartial && len(e.NoVariant) == len(names):
				e.State = Unserved
				rep.Unserved++
			default:
				e.State = Pending
				rep.Pending++
			}
			rep.Entries = append(rep.Entries, e)
		}
	}
	rep.Done = rep.Pending == 0
	return rep
}

// Names are the resources changes change, by type: what to ask the
// fleet index for (protocol.Server.Concerned) before Status.
func Names(changes []store.Change) protocol.Changed {
	ch := protocol.Changed{}
	seen := map[resource.Key]bool{}
	for _, c := range changes {
		k := resource.Key{Type: c.Key.Type, Name: c.Key.Name}
		if !seen[k] {
			seen[k] = true
			ch[k.Type] = append(ch[k.Type], k.Name)
		}
	}
	return ch
}

// AtLeast reports whether a version (a revision, or a revision and a
// constraints hash, store.Version) is at revision rev or later.
func AtLeast(version string, rev int64) bool {
	r, _, _ := strings.Cut(version, "-")
	n, err := strconv.ParseInt(r, 10, 64)
	return err == nil && n >= rev
}

// concerned returns the names of the changes ch that concern a stream's
// state t for their type, sorted.
func concerned(t protocol.TypeStatus, ch []store.Change) []string {
	seen := map[string]bool{}
	for _, c := range ch {
		if seen[c.Key.Name] {
			continue
		}
		if holds(t, c.Key) || t.URL != resource.VirtualHostURL && subscribes(t, c.Key) {
			seen[c.Key.Name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// paramSets returns the distinct parameter sets of t's subscriptions
// that select a variant changes change (by name, a wildcard or a glob
// collection, with parameters its constraints match; for virtual hosts,
// subscribed by alias, every subscription of the type), in order, when
// one of them is a TP2 locator's: a stream whose subscriptions all go by
// its node's parameters gets none (its node_params say it), so that a
// plain fleet's report does not repeat every node's metadata.
func paramSets(t protocol.TypeStatus, changes []store.Change) []map[string]string {
	var out []map[string]string
	seen := map[string]bool{}
	locator := false
	for _, s := range t.Subscriptions {
		covers := t.URL == resource.VirtualHostURL
		for _, c := range changes {
			if covers {
				break
			}
			covers = subscribes(protocol.TypeStatus{Subscriptions: []protocol.Subscription{s}}, c.Key)
		}
		if !covers || len(s.Params) == 0 {
			continue
		}
		locator = locator || s.Locator
		k := constraint.Params(s.Params).Key()
		if !seen[k] {
			seen[k] = true
			out = append(out, s.Params)
		}
	}
	if !locator {
		return nil
	}
	return out
}

// bare returns the names, of those given, that the stream subscribes to by
// name with parameters no current variant matches.
func bare(t protocol.TypeStatus, names []string, now Lookup) []string {
	var out []string
	for _, n := range names {
		for _, s := range t.Subscriptions {
			if s.Name != n {
				continue
			}
			matched := false
			for _, v := range now(t.URL, n) {
				matched = matched || v.Constraints.Match(constraint.Params(s.Params))
			}
			if !matched {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// holds reports whether the stream holds variant k (or, when it does not
// know which variant it holds, any variant of k's name).
func holds(t protocol.TypeStatus, k resource.Key) bool {
	for _, h := range t.Held {
		switch {
		case h.Variant != nil:
			if h.Variant.Key() == k {
				return true
			}
		case !h.Absent && h.Name == k.Name:
			return true
		}
	}
	return false
}

// subscribes reports whether one of the stream's subscriptions selects
// variant k: its name, a wildcard or k's glob collection, with parameters
// k's constraints match.
func subscribes(t protocol.TypeStatus, k resource.Key) bool {
	var cons constraint.Constraints
	if k.Constraints != "" {
		c, err := constraint.Parse(k.Constraints)
		if err != nil {
			return true // cannot tell: count the stream rather than miss it
		}
		cons = c
	}
	glob, inGlob := db.InGlob(k.Name)
	for _, s := range t.Subscriptions {
		if s.Name != k.Name && s.Name != "*" && s.Name != "" && (!inGlob || s.Name != glob) {
			continue
		}
		if cons.Match(constraint.Params(s.Params)) {
			return true
		}
	}
	return false
}
