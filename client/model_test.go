package client_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// A randomized model-based test: random applies, deletes (of a resource or
// one TP2 variant), watches, cancels and server restarts, against a real
// server and real clients; after each step every live watcher's latest
// event must be what a model of the store predicts for its client's
// dynamic parameters.

var modelSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

const modelSteps = 60

// modelSets are the variant sets a resource may have: each constrains the
// same keys (env, or none) and no two of a set overlap (README "Rules").
var modelSets = [][]string{
	{""},
	{"env=prod"},
	{"env=test"},
	{"env=prod", "env=test"},
	{"env=prod", "env!=prod"},
	{"env=test", "!exists(env)"},
	{"exists(env)", "!exists(env)"},
	{"env=prod", "env=test", "!exists(env)"},
}

// modelClients are the clients' dynamic parameters; nil configures none
// (plain names, matched on the node metadata, which is empty).
var modelClients = []map[string]string{{"env": "prod"}, {"env": "test"}, nil}

var modelNames = []struct{ typ, name string }{
	{resource.ClusterURL, "c0"}, {resource.ClusterURL, "c1"}, {resource.ClusterURL, "c2"},
	{resource.RouteURL, "r0"}, {resource.RouteURL, "r1"},
}

type mclient struct {
	params constraint.Params
	c      *client.Client
}

type mwatch struct {
	id     int
	cl     int
	typ    string
	name   string
	cancel client.CancelFunc
	// seen: a check confirmed that the watcher had a value, so an absence
	// now must be reported as Removed.
	seen bool

	mu   sync.Mutex
	last client.Event
	n    int
	told chan struct{} // signalled on every event, for check to wait on
}

func (w *mwatch) handle(e client.Event) {
	w.mu.Lock()
	w.last, w.n = e, w.n+1
	w.mu.Unlock()
	select {
	case w.told <- struct{}{}:
	default:
	}
}

type mkey struct{ typ, name string }

type modelRun struct {
	t       *testing.T
	sotw    bool
	rng     *rand.Rand
	o       *testorigin.Origin
	clients []*mclient
	watches []*mwatch
	nextID  int
	marker  int
	// state: resource → constraint key → payload marker.
	state map[mkey]map[string]string
	told  chan struct{} // a watcher was told something
	log   []string
}

// XDSD_MODEL_SEEDS=N runs seeds 1 to N instead, for a deeper search.
func TestModelRandom(t *testing.T) {
	seeds := modelSeeds
	if n, err := strconv.Atoi(os.Getenv("XDSD_MODEL_SEEDS")); err == nil && n > 0 {
		seeds = nil
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, tr := range transports {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", tr.name, seed), func(t *testing.T) {
				runModel(t, tr.sotw, seed)
			})
		}
	}
}

func runModel(t *testing.T, sotw bool, seed uint64) {
	m := &modelRun{t: t, sotw: sotw, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), state: map[mkey]map[string]string{}, told: make(chan struct{}, 1)}
	m.o = testorigin.Start(t)
	for _, p := range modelClients {
		b := bs{servers: []string{m.o.Addr}, sotw: sotw, params: p}.build(t)
		c := newClient(t, b, client.Options{DoesNotExistTimeout: 50 * time.Millisecond})
		m.clients = append(m.clients, &mclient{params: constraint.Params(p), c: c})
	}
	for step := range modelSteps {
		m.step(step)
		m.check(step)
	}
	for _, w := range m.watches {
		w.cancel()
	}
}

func (m *modelRun) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

func (m *modelRun) step(step int) {
	m.logf("-- step %d", step)
	switch r := m.rng.IntN(100); {
	case r < 30:
		m.apply()
	case r < 45:
		m.delete()
	case r < 70:
		m.watch(m.rng.IntN(len(m.clients)), modelNames[m.rng.IntN(len(modelNames))])
	case r < 92:
		m.cancelWatch()
	default:
		m.logf("restart: stop")
		m.o.Stop()
		if m.rng.IntN(2) == 0 {
			if m.rng.IntN(2) == 0 {
				m.apply()
			} else {
				m.delete()
			}
		}
		m.logf("restart: start")
		m.o.Start()
	}
}

func (m *modelRun) payload(typ, name, marker string) string {
	if typ == resource.ClusterURL {
		return cluster(name, marker)
	}
	return fmt.Sprintf("\"@type\": type.googleapis.com/envoy.config.route.v3.RouteConfiguration\nname: %q\nvirtual_hosts:\n- name: %q\n  domains: [\"*\"]\n", name, marker)
}

// apply puts a resource: a new variant set with fresh payloads, or the same
// set with one variant's payload changed (the others re-applied unchanged).
func (m *modelRun) apply() {
	n := modelNames[m.rng.IntN(len(modelNames))]
	k := mkey(n)
	cur := m.state[k]
	next := map[string]string{}
	if len(cur) > 0 && m.rng.IntN(2) == 0 {
		keys := sortedKeys(cur)
		change := keys[m.rng.IntN(len(keys))]
		for _, c := range keys {
			next[c] = cur[c]
		}
		m.marker++
		next[change] = fmt.Sprintf("m%d", m.marker)
	} else {
		for _, c := range modelSets[m.rng.IntN(len(modelSets))] {
			m.marker++
			next[constraint.MustParse(orTrue(c)).Key()] = fmt.Sprintf("m%d", m.marker)
		}
	}
	var docs []string
	for _, c := range sortedKeys(next) {
		doc := fmt.Sprintf("name: %s\n", n.name)
		if c != "" {
			doc += fmt.Sprintf("constraints: %q\n", c)
		}
		docs = append(docs, doc+"resource:\n"+indent(m.payload(n.typ, n.name, next[c])))
	}
	m.logf("apply %s %s", n.name, fmtVariants(next))
	m.o.Apply(strings.Join(docs, "---\n"))
	m.state[k] = next
}

func orTrue(c string) string {
	if c == "" {
		return "true"
	}
	return c
}

// delete removes a resource, or one of its variants.
func (m *modelRun) delete() {
	var have []mkey
	for _, n := range modelNames {
		if len(m.state[mkey(n)]) > 0 {
			have = append(have, mkey(n))
		}
	}
	if len(have) == 0 {
		m.logf("delete: nothing to delete")
		return
	}
	k := have[m.rng.IntN(len(have))]
	if m.rng.IntN(2) == 0 {
		m.logf("delete %s (all variants)", k.name)
		m.o.Commit(store.Batch{Deletes: []store.Delete{{Type: k.typ, Name: k.name, All: true}}})
		delete(m.state, k)
		return
	}
	keys := sortedKeys(m.state[k])
	c := keys[m.rng.IntN(len(keys))]
	m.logf("delete %s variant [%s]", k.name, c)
	m.o.Commit(store.Batch{Deletes: []store.Delete{{Type: k.typ, Name: k.name, Constraints: c}}})
	delete(m.state[k], c)
	if len(m.state[k]) == 0 {
		delete(m.state, k)
	}
}

func (m *modelRun) watch(cl int, n struct{ typ, name string }) {
	if !m.o.Running() {
		return
	}
	m.nextID++
	w := &mwatch{id: m.nextID, cl: cl, typ: n.typ, name: n.name, told: m.told}
	cancel, err := m.clients[cl].c.Watch(m.t.Context(), n.typ, n.name, w.handle)
	if err != nil {
		m.t.Fatal(err)
	}
	w.cancel = cancel
	m.watches = append(m.watches, w)
	m.logf("watch w%d: client %d %v %s", w.id, cl, m.clients[cl].params, n.name)
}

// cancelWatch cancels a watch; when it was the client's last watch of the
// name, it is sometimes watched again at once.
func (m *modelRun) cancelWatch() {
	if len(m.watches) == 0 {
		m.logf("cancel: no watches")
		return
	}
	i := m.rng.IntN(len(m.watches))
	w := m.watches[i]
	<-w.cancel() // ended, so that a watch again at once follows its end
	m.watches = slices.Delete(m.watches, i, i+1)
	last := !slices.ContainsFunc(m.watches, func(o *mwatch) bool { return o.cl == w.cl && o.name == w.name })
	m.logf("cancel w%d (last of its name: %v)", w.id, last)
	if last && m.rng.IntN(2) == 0 {
		m.watch(w.cl, struct{ typ, name string }{w.typ, w.name})
	}
}

// check waits until every live watcher's latest event is the expected one.
func (m *modelRun) check(step int) {
	versions := m.storeVersions()
	deadline := time.After(testorigin.Wait)
	for {
		diffs := m.diffs(versions)
		if len(diffs) == 0 {
			for _, w := range m.watches {
				w.mu.Lock()
				if w.last.Kind == client.Updated {
					w.seen = true
				}
				w.mu.Unlock()
			}
			return
		}
		// Watchers change only when they are told something.
		select {
		case <-m.told:
		case <-deadline:
			m.t.Fatalf("seed %s step %d: watchers disagree with the model:\n%s\n\nsteps:\n%s",
				m.t.Name(), step, strings.Join(diffs, "\n"), strings.Join(m.log, "\n"))
		}
	}
}

// storeVersions reads the store's variants (the model's own check: it must
// hold what the model says) and their versions.
func (m *modelRun) storeVersions() map[string]string {
	m.t.Helper()
	cs, err := m.o.St.Changes(m.t.Context(), store.FromStart)
	if err != nil {
		m.t.Fatal(err)
	}
	got := map[mkey]map[string]string{}
	versions := map[string]string{}
	for _, v := range cs.Puts {
		k := mkey{v.Type.URL, v.Name}
		if got[k] == nil {
			got[k] = map[string]string{}
		}
		got[k][v.Constraints.Key()] = markerOf(v)
		versions[k.name+"["+v.Constraints.Key()+"]"] = v.Version
	}
	for _, k := range append(sortedMKeys(got), sortedMKeys(m.state)...) {
		if fmtVariants(got[k]) != fmtVariants(m.state[k]) {
			m.t.Fatalf("store holds %s %s, the model %s\nsteps:\n%s", k.name, fmtVariants(got[k]), fmtVariants(m.state[k]), strings.Join(m.log, "\n"))
		}
	}
	return versions
}

func (m *modelRun) diffs(versions map[string]string) []string {
	var out []string
	for _, w := range m.watches {
		w.mu.Lock()
		e, n := w.last, w.n
		w.mu.Unlock()
		p := m.clients[w.cl].params
		want, ok := m.expect(w, e, versions)
		if !ok {
			out = append(out, fmt.Sprintf("w%d (client %v, %s): got %s (after %d events), want %s", w.id, p, w.name, modelDescribe(e, n), n, want))
		}
	}
	return out
}

// expect says what w should hold, and whether e is it.
func (m *modelRun) expect(w *mwatch, e client.Event, versions map[string]string) (string, bool) {
	p := m.clients[w.cl].params
	var match []string
	for c := range m.state[mkey{w.typ, w.name}] {
		if constraint.MustParse(orTrue(c)).Match(p) {
			match = append(match, c)
		}
	}
	switch {
	case len(match) > 1:
		m.t.Fatalf("model: %v match %v: the variant sets overlap", p, match)
	case len(match) == 1:
		c := match[0]
		marker := m.state[mkey{w.typ, w.name}][c]
		version := versions[w.name+"["+c+"]"]
		want := fmt.Sprintf("updated [%s] v%s %s", c, version, marker)
		// A client without parameters subscribes by plain names and is
		// served plain resources: no constraints to compare.
		return want, e.Kind == client.Updated && e.Variant != nil && (p == nil || e.Variant.Constraints.Key() == c) &&
			m.sameVersion(e.Variant.Version, version) && markerOf(e.Variant) == marker
	}
	if m.sotw && w.typ == resource.RouteURL {
		// SotW RDS is not full state: nothing says a resource went away, so
		// a watcher may keep the last value — one meant for its client.
		want := "removed, does-not-exist, or a stale value matching the parameters"
		switch e.Kind {
		case client.Removed, client.DoesNotExist:
			return want, true
		case client.Updated:
			return want, e.Variant != nil && e.Variant.Constraints.Match(p)
		}
		return want, false
	}
	if w.seen {
		return "removed", e.Kind == client.Removed
	}
	// A new watcher may first get a cached value that the server then
	// says is gone.
	return "does-not-exist (or removed)", e.Kind == client.DoesNotExist || e.Kind == client.Removed
}

// sameVersion: the variant's own version, on both transports (xdsd's
// client takes SotW resources wrapped, with their version).
func (m *modelRun) sameVersion(got, want string) bool {
	return got == want
}

func markerOf(v *resource.Variant) string {
	msg, err := v.Message()
	if err != nil {
		return "undecodable: " + err.Error()
	}
	switch x := msg.(type) {
	case *clusterv3.Cluster:
		return x.AltStatName
	case *routev3.RouteConfiguration:
		if len(x.VirtualHosts) > 0 {
			return x.VirtualHosts[0].Name
		}
	}
	return fmt.Sprintf("%T", msg)
}

func modelDescribe(e client.Event, n int) string {
	if n == 0 {
		return "no event"
	}
	s := e.Kind.String()
	if e.Variant != nil {
		s += fmt.Sprintf(" [%s] v%s %s", e.Variant.Constraints.Key(), e.Variant.Version, markerOf(e.Variant))
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}

func fmtVariants(vs map[string]string) string {
	var parts []string
	for _, c := range sortedKeys(vs) {
		parts = append(parts, fmt.Sprintf("[%s]=%s", c, vs[c]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedMKeys[V any](m map[mkey]V) []mkey {
	keys := make([]mkey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].name < keys[j].name })
	return keys
}
