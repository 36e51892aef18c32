// Package fleet holds what every reader of the fleet view shares
// (docs/fleet.md): a client's agent (the software it runs), the groups of
// clients by agent and parameter set, and the Index that counts them as
// streams come, go and change their subscriptions.
//
// The index is kept as events happen, never rebuilt per query: the
// protocol engine, which sees a stream subscribe, unsubscribe and end, owns
// one and tells it; the admin API, the checks and the page read its groups.
// Per-stream status stays in the stream: the index only counts.
//
// fleet must not import db, protocol, the roles or gRPC: it sits beside
// constraint, below everything that reads it.
package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/xdsd/xdsd/constraint"
)

// The agents: which client software a stream runs. Every grpc-* agent is
// checked by the gRPC rules, envoy by Envoy's (internal/clientcheck).
const (
	Envoy    = "envoy"
	GRPCGo   = "grpc-go"
	GRPCJava = "grpc-java"
	GRPCJS   = "grpc-js"
	GRPCCpp  = "grpc-cpp" // gRPC C-core and the languages built on it (C++, Python, Ruby…)
	Xdsd     = "xdsd"     // an xdsd relay or client
	Other    = "other"
)

// AgentOf tells a client's agent from the node's user_agent_name and the
// gRPC user-agent header of its stream. The node's name says what the
// client is (Envoy sets "envoy"; grpc-go "gRPC Go"; xdsd "xdsd"); the
// header, which every gRPC library sets ("grpc-go/1.x", "grpc-c/…",
// "grpc-node-js/…", "grpc-java-netty/…"), tells a client that names
// nothing on its node, or nothing known.
//
// A name is matched whole, or by its first words ("gRPC Node Pure JS",
// "gRPC C-core linux"), never as a substring: "django-client" is not
// grpc-go, nor "mongoose" envoy.
func AgentOf(userAgentName, userAgent string) string {
	n := strings.Join(strings.Fields(strings.ToLower(userAgentName)), " ")
	for _, k := range agentNames {
		if n == k.name || strings.HasPrefix(n, k.name+" ") || strings.HasPrefix(n, k.name+"/") {
			return k.agent
		}
	}
	// The header: several products may be listed ("grpc-c++/1.60
	// grpc-c/37 (linux; chttp2)", "xdsd/0.1 grpc-go/1.70"): the first
	// one that names a library decides.
	for _, p := range strings.Fields(strings.ToLower(userAgent)) {
		switch {
		case strings.HasPrefix(p, "xdsd/"):
			return Xdsd
		case strings.HasPrefix(p, "envoy/"):
			return Envoy
		case strings.HasPrefix(p, "grpc-go/"):
			return GRPCGo
		case strings.HasPrefix(p, "grpc-java"):
			return GRPCJava
		case strings.HasPrefix(p, "grpc-node"), strings.HasPrefix(p, "grpc-js"):
			return GRPCJS
		case strings.HasPrefix(p, "grpc-c/"), strings.HasPrefix(p, "grpc-c++/"), strings.HasPrefix(p, "grpc-python"), strings.HasPrefix(p, "grpc-ruby"):
			return GRPCCpp
		}
	}
	return Other
}

// agentNames are the user_agent_name values the clients send, lower
// case, with their agent.
var agentNames = []struct{ name, agent string }{
	{"envoy", Envoy},
	{"xdsd", Xdsd},
	{"grpc go", GRPCGo},
	{"grpc java", GRPCJava},
	{"grpc node", GRPCJS}, // grpc-js: "gRPC Node Pure JS"
	{"grpc js", GRPCJS},
	{"grpc c-core", GRPCCpp},
	{"grpc c++", GRPCCpp},
	{"grpc python", GRPCCpp},
	{"grpc ruby", GRPCCpp},
	{"grpc php", GRPCCpp},
}

// IsGRPC reports whether an agent is one of gRPC's libraries (checked by
// the gRPC rules).
func IsGRPC(agent string) bool { return strings.HasPrefix(agent, "grpc-") }

// SampleNodes is how many node ids a group names.
const SampleNodes = 3

// Group is one (agent, parameter set) of connected clients. A stream is
// counted once under each parameter set its subscriptions carry (a relay
// carries the sets of the clients behind it), or under its node's
// parameters while it subscribes to nothing.
type Group struct {
	Agent  string            `json:"agent"`
	Params map[string]string `json:"params,omitempty"`
	Count  int               `json:"count"`
	// Nodes are some of its clients' node ids (at most SampleNodes, the
	// first in order).
	Nodes []string `json:"sample_nodes,omitempty"`
	// Holds says what the group's first client holds, per type (the
	// variants a group's clients get are the same: they share an agent
	// and parameters), as the page shows it; at most a few lines.
	Holds []string `json:"holds,omitempty"`
	// Sample is the Owner of the group's first client (its stream), for
	// the engine to fill in Holds; nil across replicas.
	Sample any `json:"-"`
}

// Key is the group's identity: agent and canonical parameters.
func (g Group) Key() string { return g.Agent + "\x00" + constraint.Params(g.Params).Key() }

// Merge adds up the groups of several replicas: one group per (agent,
// parameter set), counts summed, sample nodes the first in order. The
// result is sorted by agent, then parameters.
func Merge(lists ...[]Group) []Group {
	at := map[string]int{}
	var out []Group
	for _, l := range lists {
		for _, g := range l {
			k := g.Key()
			i, ok := at[k]
			if !ok {
				at[k] = len(out)
				g.Nodes, g.Sample = slices.Clone(g.Nodes), nil
				out = append(out, g)
				continue
			}
			out[i].Count += g.Count
			out[i].Nodes = sample(append(out[i].Nodes, g.Nodes...))
		}
	}
	sortGroups(out)
	return out
}

func sample(nodes []string) []string {
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) > SampleNodes {
		nodes = nodes[:SampleNodes]
	}
	return nodes
}

func sortGroups(gs []Group) {
	slices.SortFunc(gs, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(constraint.Params(a.Params).Key(), constraint.Params(b.Params).Key()))
	})
}

// Index counts the connected streams by group. It is safe for concurrent
// use; its lock is taken after a stream's own (a stream tells it of a
// change while holding its state), never the other way.
type Index struct {
	mu     sync.Mutex
	groups map[groupKey]*group
}

type groupKey struct{ agent, params string }

type group struct {
	params  constraint.Params
	members map[*Member]struct{}
	// samples are the members with the smallest node ids (SampleNodes of
	// them, in order), kept as members come and go so that reading the
	// groups costs the groups, not their members.
	samples []*Member
}

func (g *group) addSample(m *Member) {
	i, _ := slices.BinarySearchFunc(g.samples, m, cmpMember)
	if i >= SampleNodes {
		return
	}
	g.samples = slices.Insert(g.samples, i, m)
	if len(g.samples) > SampleNodes {
		g.samples = g.samples[:SampleNodes]
	}
}

func (g *group) removeSample(m *Member) {
	i := slices.Index(g.samples, m)
	if i < 0 {
		return
	}
	g.samples = slices.Delete(g.samples, i, i+1)
	if len(g.members) >= SampleNodes {
		// One sample left: the next smallest is found among all the
		// members (only when a sample leaves).
		g.samples = g.samples[:0]
		for o := range g.members {
			g.addSample(o)
		}
	}
}

func cmpMember(a, b *Member) int {
	if c := cmp.Compare(a.Node, b.Node); c != 0 {
		return c
	}
	return cmp.Compare(fmt.Sprintf("%p", a), fmt.Sprintf("%p", b))
}

// Member is one stream's place in the index. Its exported fields are
// read-only once joined.
type Member struct {
	Agent string
	Node  string
	// Owner is the party counted (a protocol stream).
	Owner any
	// base is the parameter set the stream counts under while it
	// subscribes to nothing: its node's.
	base constraint.Params
	// subs counts the stream's subscriptions per parameter set (most
	// streams have one; a relay's, a few: a slice costs an idle stream
	// less than a map). Guarded by Index.mu.
	subs   []paramCount
	joined bool
	left   bool
}

type paramCount struct {
	key string
	p   constraint.Params
	n   int
}

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{groups: map[groupKey]*group{}} }

// Join counts a stream (owner), under its node's parameters until it
// subscribes.
func (ix *Index) Join(owner any, agent, node string, nodeParams constraint.Params) *Member {
	m := &Member{Owner: owner, Agent: agent}
	ix.JoinMember(m, node, nodeParams)
	return m
}

// JoinMember counts a member made before its node was known (its Owner
// and Agent set), once: a stream knows the gRPC user agent when it
// starts and its node with its first request.
func (ix *Index) JoinMember(m *Member, node string, nodeParams constraint.Params) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if m.joined || m.left {
		return
	}
	m.joined, m.Node, m.base = true, node, nodeParams
	ix.add(m, m.base.Key(), m.base)
}

// Joined reports whether a member is counted (JoinMember ran).
func (ix *Index) Joined(m *Member) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return m.joined
}

// Subscribed tells the index that a member's subscriptions under
// parameters p (whose key is key) grew by delta (negative: dropped).
func (ix *Index) Subscribed(m *Member, key string, p constraint.Params, delta int) {
	if m == nil || delta == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if m.left || !m.joined {
		return
	}
	i := slices.IndexFunc(m.subs, func(c paramCount) bool { return c.key == key })
	switch {
	case i < 0 && delta > 0:
		if len(m.subs) == 0 {
			ix.remove(m, m.base.Key())
		}
		m.subs = append(m.subs, paramCount{key, p, delta})
		ix.add(m, key, p)
	case i < 0:
	case m.subs[i].n+delta > 0:
		m.subs[i].n += delta
	default:
		m.subs = slices.Delete(m.subs, i, i+1)
		ix.remove(m, key)
		if len(m.subs) == 0 {
			m.subs = nil
			ix.add(m, m.base.Key(), m.base)
		}
	}
}

// Leave stops counting a stream.
func (ix *Index) Leave(m *Member) {
	if m == nil {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if m.left {
		return
	}
	m.left = true
	if !m.joined {
		return
	}
	if len(m.subs) == 0 {
		ix.remove(m, m.base.Key())
	}
	for _, c := range m.subs {
		ix.remove(m, c.key)
	}
}

func (ix *Index) add(m *Member, key string, p constraint.Params) {
	gk := groupKey{m.Agent, key}
	g := ix.groups[gk]
	if g == nil {
		g = &group{params: p, members: map[*Member]struct{}{}}
		ix.groups[gk] = g
	}
	if _, ok := g.members[m]; !ok {
		g.members[m] = struct{}{}
		g.addSample(m)
	}
}

func (ix *Index) remove(m *Member, key string) {
	gk := groupKey{m.Agent, key}
	if g := ix.groups[gk]; g != nil {
		delete(g.members, m)
		g.removeSample(m)
		if len(g.members) == 0 {
			delete(ix.groups, gk)
		}
	}
}

// Groups reports the groups of the streams counted, sorted by agent,
// then parameters. Its cost is the number of groups plus the members
// looked over for sample node ids.
func (ix *Index) Groups() []Group {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]Group, 0, len(ix.groups))
	for k, g := range ix.groups {
		gr := Group{Agent: k.agent, Params: g.params, Count: len(g.members)}
		for _, m := range g.samples {
			gr.Nodes = insertSample(gr.Nodes, m.Node)
		}
		if len(g.samples) > 0 {
			gr.Sample = g.samples[0].Owner
		}
		out = append(out, gr)
	}
	sortGroups(out)
	return out
}

// Groupings reports the group keys a member is counted under: its
// agent and each parameter set (the page files a stream's state under
// them).
func (ix *Index) Groupings(m *Member) []Group {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(m.subs) == 0 {
		return []Group{{Agent: m.Agent, Params: m.base}}
	}
	out := make([]Group, 0, len(m.subs))
	for _, c := range m.subs {
		out = append(out, Group{Agent: m.Agent, Params: c.p})
	}
	return out
}

// insertSample keeps the SampleNodes smallest node ids, in order.
func insertSample(s []string, n string) []string {
	i, found := slices.BinarySearch(s, n)
	if found || i >= SampleNodes {
		return s
	}
	s = slices.Insert(s, i, n)
	if len(s) > SampleNodes {
		s = s[:SampleNodes]
	}
	return s
}

// Unreachable is a registered replica that did not answer a fleet
// question, and why: its clients are missing from the answer, which
// says so rather than showing fewer clients.
type Unreachable struct {
	Replica string `json:"replica"`
	Error   string `json:"error"`
}

// String is how the command line and the page name it.
func (u Unreachable) String() string { return u.Replica + ": " + u.Error }
