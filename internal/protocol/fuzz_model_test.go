package protocol_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// picker turns fuzz input into choices; it runs out when the input does.
type picker struct {
	data []byte
	i    int
}

func (p *picker) more() bool { return p.i < len(p.data) }

func (p *picker) pick(n int) int {
	if p.i >= len(p.data) {
		return 0
	}
	b := p.data[p.i]
	p.i++
	return int(b) % n
}

// FuzzStreamModel drives one server with a request sequence read from the
// input — SotW or delta, database changes (TP2 variant sets replaced,
// resources removed), subscriptions and unsubscriptions of names, a TP1
// glob and the wildcard, ACKs and NACKs — and checks after every step that
// what the client holds, applying each response it ACKs, is what a
// reference model says its subscriptions cover: for each covered name, the
// variant its parameters select. A NACKed response is not applied; the
// names it carried are left out of the comparison until a later response
// brings them again, and the server must not send the rejected version
// again. The seed corpus runs as a test; `go test -fuzz FuzzStreamModel`
// searches further (.ci/run does, briefly).
func FuzzStreamModel(f *testing.F) {
	for _, seed := range []string{
		"\x00\x00\x03\x01\x03\x02\x05\x00\x01\x04\x03\x06\x02",
		"\x01\x00\x03\x01\x05\x02\x00\x03\x00\x04\x01\x01",
		"\x00\x05\x05\x03\x07\x00\x02\x04\x00\x05\x01\x03\x01\x02\x00",
		"\x01\x03\x00\x05\x00\x00\x01\x03\x02\x04\x05\x00\x02\x01",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 200 {
			data = data[:200] // bound one input's run
		}
		p := &picker{data: data}
		switch p.pick(3) {
		case 0:
			fuzzDelta(t, p)
		case 1:
			fuzzSotW(t, p)
		default:
			fuzzLocators(t, p)
		}
	})
}

var (
	fuzzNames = []string{"a", "b", "xdstp://a/envoy.config.cluster.v3.Cluster/g/1", "xdstp://a/envoy.config.cluster.v3.Cluster/g/2"}
	fuzzGlob  = "xdstp://a/envoy.config.cluster.v3.Cluster/g/*"
	fuzzSets  = [][]string{{""}, {"env=prod"}, {"env=test"}, {"env=prod", "env=test"}}
)

// fuzzChange changes one name in h's db: puts a variant set, or removes it.
func fuzzChange(h *harness, p *picker, step int) string {
	n := fuzzNames[p.pick(len(fuzzNames))]
	if p.pick(3) == 0 {
		h.remove(resource.ClusterURL, n)
		return "remove " + n
	}
	set := fuzzSets[p.pick(len(fuzzSets))]
	putVariantSet(h, n, set, step)
	return fmt.Sprintf("put %s %v", n, set)
}

// fuzzWant is what a client with env=prod should hold of the names
// covered: name → version.
func fuzzWant(h *harness, covered func(string) bool) map[string]string {
	want := map[string]string{}
	h.db.Read(func(rd *db.Reader) {
		for _, n := range fuzzNames {
			if v := rd.Get(resource.ClusterURL, n, constraint.Params{"env": "prod"}); v != nil && covered(n) {
				want[n] = v.Version
			}
		}
	})
	return want
}

func fuzzDelta(t *testing.T, p *picker) {
	h := newHarness(t)
	c := h.delta(node("n", map[string]string{"env": "prod"}))
	subs := append([]string{"*", fuzzGlob}, fuzzNames...)
	subscribed := map[string]bool{"a": true}
	covered := func(n string) bool {
		if subscribed[n] || subscribed["*"] {
			return true
		}
		gl, ok := db.InGlob(n)
		return ok && subscribed[gl]
	}
	state := map[string]string{}
	stale := map[string]bool{} // names of a NACKed response, until brought again
	rejected := map[string]string{}
	c.Sub(resource.ClusterURL, "a")
	var log []string
	for step := 0; p.more(); step++ {
		nack := false
		switch k := p.pick(6); k {
		case 0, 1, 2:
			log = append(log, fuzzChange(h, p, step))
		case 3, 4:
			n := subs[p.pick(len(subs))]
			if subscribed[n] {
				c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesUnsubscribe: []string{n}})
				delete(subscribed, n)
				// The client forgets what is no longer covered, and a name
				// it unsubscribes even if still covered: the server sends
				// that again (docs/protocol.md §2.3), a NACKed version too.
				for held := range state {
					if held == n || !covered(held) {
						delete(state, held)
					}
				}
				for name := range rejected {
					if name == n || !covered(name) {
						delete(stale, name)
						delete(rejected, name)
					}
				}
				log = append(log, "unsubscribe "+n)
			} else {
				c.Sub(resource.ClusterURL, n)
				subscribed[n] = true
				// A subscription is answered even with what the client
				// was sent before (docs/protocol.md §2.2): a NACKed
				// version it covers may come again.
				for name := range rejected {
					if gl, ok := db.InGlob(name); name == n || n == "*" || ok && gl == n {
						delete(rejected, name)
					}
				}
				log = append(log, "subscribe "+n)
			}
		case 5:
			nack = true
			log = append(log, fuzzChange(h, p, step)+", NACKed")
		}
		bn := fmt.Sprintf("barrier-%d", step)
		h.putSecret(bn)
		c.Sub(resource.SecretURL, bn)
		for done := false; !done; {
			r := c.Recv()
			if r.TypeUrl == resource.SecretURL {
				c.Ack(r)
				done = len(r.Resources) == 1 && r.Resources[0].Name == bn
				continue
			}
			for _, res := range r.Resources {
				if rejected[res.Name] != "" && rejected[res.Name] == res.Version {
					t.Fatalf("after\n  %s\nthe server sent %s@%s again, which the client NACKed", strings.Join(log, "\n  "), res.Name, res.Version)
				}
			}
			if nack {
				c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, ErrorDetail: &status.Status{Code: 3, Message: "fuzz: rejected"}})
				for _, res := range r.Resources {
					stale[res.Name], rejected[res.Name] = true, res.Version
				}
				for _, n := range r.RemovedResources {
					stale[n] = true
				}
				continue
			}
			for _, res := range r.Resources {
				state[res.Name] = res.Version
				delete(stale, res.Name)
			}
			for _, n := range r.RemovedResources {
				delete(state, n)
				delete(stale, n)
			}
			c.Ack(r)
		}
		want := fuzzWant(h, covered)
		for n := range stale {
			delete(want, n)
		}
		got := map[string]string{}
		for n, v := range state {
			if !stale[n] {
				got[n] = v
			}
		}
		if fmt.Sprint(sorted(want)) != fmt.Sprint(sorted(got)) {
			t.Fatalf("delta, after\n  %s\nthe client holds %v\nwant %v", strings.Join(log, "\n  "), sorted(got), sorted(want))
		}
	}
}

func fuzzSotW(t *testing.T, p *picker) {
	h := newHarness(t)
	c := h.sotw(node("n", map[string]string{"env": "prod"}))
	subs := append([]string{"*"}, fuzzNames[:2]...)
	subscribed := map[string]bool{"a": true}
	list := func() []string {
		var out []string
		for n := range subscribed {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
	covered := func(n string) bool { return subscribed[n] || subscribed["*"] }
	state := map[string]bool{}
	stale := false // the last response was NACKed: the client keeps an older state
	var nonce, version, rejected string
	c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list()})
	var log []string
	for step := 0; p.more(); step++ {
		nack := false
		switch k := p.pick(6); k {
		case 0, 1, 2:
			log = append(log, fuzzChange(h, p, step))
		case 3, 4:
			n := subs[p.pick(len(subs))]
			if subscribed[n] {
				delete(subscribed, n)
				log = append(log, "unsubscribe "+n)
			} else {
				subscribed[n] = true
				rejected = "" // a new name is answered with all it covers (§1.6)
				log = append(log, "subscribe "+n)
			}
			c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list(), ResponseNonce: nonce, VersionInfo: version})
		case 5:
			nack = true
			log = append(log, fuzzChange(h, p, step)+", NACKed")
		}
		// Two barriers: a round's cluster removals come after its other
		// responses (make-before-break).
		for round := range 2 {
			bn := fmt.Sprintf("barrier-%d-%d", step, round)
			h.putSecret(bn)
			c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.SecretURL, ResourceNames: []string{bn}})
			for {
				r := c.Recv()
				if r.TypeUrl == resource.SecretURL {
					if len(r.Resources) == 1 && sotwNames(t, r)[0] == bn {
						break
					}
					continue
				}
				// The rejected response is never sent again. (The second
				// response of a make-before-break round carries the same
				// version with the removals: other content.)
				got := r.VersionInfo + " " + fmt.Sprint(sotwNames(t, r))
				if rejected != "" && got == rejected {
					t.Fatalf("after\n  %s\nthe server sent the NACKed response %s again", strings.Join(log, "\n  "), rejected)
				}
				if nack {
					// Later requests carry this response's nonce (an older
					// one is stale, and ignored: docs/protocol.md §1.8) and
					// the version last accepted.
					nack, stale, rejected, nonce = false, true, got, r.Nonce
					c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list(), ResponseNonce: r.Nonce, VersionInfo: version,
						ErrorDetail: &status.Status{Code: 3, Message: "fuzz: rejected"}})
					continue
				}
				stale = false
				state = map[string]bool{}
				for _, n := range sotwNames(t, r) {
					state[n] = true
				}
				nonce, version = r.Nonce, r.VersionInfo
				c.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: list(), ResponseNonce: nonce, VersionInfo: version})
			}
		}
		if stale {
			continue
		}
		var got, exp []string
		for n := range state {
			got = append(got, n)
		}
		for n := range fuzzWant(h, covered) {
			exp = append(exp, n)
		}
		sort.Strings(got)
		sort.Strings(exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("sotw, after\n  %s\nthe client holds %v\nwant %v", strings.Join(log, "\n  "), got, exp)
		}
	}
}

// fuzzLocators: a delta client that names resources by TP2 locator, with
// env=prod and env=test, possibly both for one name, and holds variants
// by name and constraints (resource_name): for each locator, the variant
// its parameters select; a variant no locator selects any more is
// removed by resource_name (TP2).
func fuzzLocators(t *testing.T, p *picker) {
	h := newHarness(t)
	c := h.delta(node("loc", nil))
	type loc struct{ name, env string }
	envs := []string{"prod", "test"}
	subscribed := map[loc]bool{}
	type key struct{ name, ckey string }
	state := map[key]string{}
	var log []string
	c.Sub(resource.ClusterURL, "a") // a first request naming something: no implicit wildcard
	subscribed[loc{"a", ""}] = true
	for step := 0; p.more(); step++ {
		switch k := p.pick(5); k {
		case 0, 1, 2:
			log = append(log, fuzzChange(h, p, step))
		default:
			l := loc{fuzzNames[p.pick(len(fuzzNames))], envs[p.pick(len(envs))]}
			rl := []*discoveryv3.ResourceLocator{{Name: l.name, DynamicParameters: map[string]string{"env": l.env}}}
			if subscribed[l] {
				c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceLocatorsUnsubscribe: rl})
				delete(subscribed, l)
				// The client forgets the variant it held for the locator,
				// unless another locator of the name selects it too.
				selects := func(ckey, env string) bool {
					cons := constraint.MustParse(ckey)
					params := constraint.Params{}
					if env != "" {
						params["env"] = env
					}
					return cons.Match(params)
				}
				for k := range state {
					if k.name != l.name || !selects(k.ckey, l.env) {
						continue
					}
					kept := false
					for other := range subscribed {
						kept = kept || other.name == l.name && selects(k.ckey, other.env)
					}
					if !kept {
						delete(state, k)
					}
				}
				log = append(log, fmt.Sprintf("unsubscribe %s {env=%s}", l.name, l.env))
			} else {
				c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceLocatorsSubscribe: rl})
				subscribed[l] = true
				log = append(log, fmt.Sprintf("subscribe %s {env=%s}", l.name, l.env))
			}
		}
		// What the locators select now.
		want := map[key]string{}
		h.db.Read(func(rd *db.Reader) {
			for l := range subscribed {
				params := constraint.Params{}
				if l.env != "" {
					params["env"] = l.env
				}
				if v := rd.Get(resource.ClusterURL, l.name, params); v != nil {
					want[key{l.name, v.Constraints.Key()}] = v.Version
				}
			}
		})
		bn := fmt.Sprintf("barrier-%d", step)
		h.putSecret(bn)
		c.Sub(resource.SecretURL, bn)
		for done := false; !done; {
			r := c.Recv()
			if r.TypeUrl == resource.SecretURL {
				c.Ack(r)
				done = len(r.Resources) == 1 && r.Resources[0].Name == bn
				continue
			}
			for _, res := range r.Resources {
				k := key{res.Name, ""}
				if rn := res.GetResourceName(); rn != nil {
					cons, err := constraint.FromProto(rn.GetDynamicParameterConstraints())
					if err != nil {
						t.Fatal(err)
					}
					k = key{rn.GetName(), cons.Key()}
				}
				state[k] = res.Version
			}
			for _, n := range r.RemovedResources {
				for k := range state {
					if k.name == n {
						delete(state, k)
					}
				}
			}
			for _, rn := range r.RemovedResourceNames {
				cons, err := constraint.FromProto(rn.GetDynamicParameterConstraints())
				if err != nil {
					t.Fatal(err)
				}
				delete(state, key{rn.GetName(), cons.Key()})
			}
			c.Ack(r)
		}
		var got, exp []string
		for k, v := range state {
			got = append(got, fmt.Sprintf("%s[%s]@%s", k.name, k.ckey, v))
		}
		for k, v := range want {
			exp = append(exp, fmt.Sprintf("%s[%s]@%s", k.name, k.ckey, v))
		}
		sort.Strings(got)
		sort.Strings(exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("locators, after\n  %s\nthe client holds %v\nwant %v", strings.Join(log, "\n  "), got, exp)
		}
	}
}
