package db

import (
	"sort"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

// vhds indexes the virtual hosts stored under one route configuration
// ("<rc>/<vhost>") by domain, for on-demand VHDS: a subscription to
// "<rc>/<host>" resolves to the virtual host whose domains match host, with
// Envoy's precedence (exact, then the longest "*suffix", then the longest
// "prefix*", then "*"; docs/protocol.md §5).
type vhds struct {
	rc      string
	entries map[*entry]struct{}
	exact   map[string]map[*entry]struct{}
	suffix  map[string]map[*entry]struct{} // "*.foo.com" is held as ".foo.com"
	prefix  map[string]map[*entry]struct{} // "foo.*" is held as "foo."
	any     map[*entry]struct{}
	subs    map[*Subscriber]int
}

// vhdsRouteConfig splits "<rc>/<host>" from the right: a host has no '/',
// a route configuration name may (on-demand VHDS naming convention).
func vhdsRouteConfig(n string) string {
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		return n[:i]
	}
	return ""
}

func (t *table) vhdsNS(rc string) *vhds {
	ns := t.vhds[rc]
	if ns == nil {
		ns = &vhds{rc: rc, entries: map[*entry]struct{}{}, exact: map[string]map[*entry]struct{}{},
			suffix: map[string]map[*entry]struct{}{}, prefix: map[string]map[*entry]struct{}{},
			any: map[*entry]struct{}{}, subs: map[*Subscriber]int{}}
		t.vhds[rc] = ns
	}
	return ns
}

func (t *table) gcVHDS(rc string) {
	if ns := t.vhds[rc]; ns != nil && len(ns.entries) == 0 && len(ns.subs) == 0 {
		delete(t.vhds, rc)
	}
}

// bucket returns the index set a domain pattern belongs in, and its key.
func (ns *vhds) bucket(d string) (map[string]map[*entry]struct{}, string) {
	switch {
	case d == "*":
		return nil, ""
	case strings.HasPrefix(d, "*"):
		return ns.suffix, d[1:]
	case strings.HasSuffix(d, "*"):
		return ns.prefix, d[:len(d)-1]
	}
	return ns.exact, d
}

func (ns *vhds) index(e *entry, d string, add bool) {
	m, k := ns.bucket(d)
	if m == nil {
		if add {
			ns.any[e] = struct{}{}
		} else {
			delete(ns.any, e)
		}
		return
	}
	if add {
		if m[k] == nil {
			m[k] = map[*entry]struct{}{}
		}
		m[k][e] = struct{}{}
		return
	}
	delete(m[k], e)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

// domainsOf reads a virtual host variant's domains, lowercased (host
// matching ignores case).
func domainsOf(v *resource.Variant) []string {
	if v.PayloadURL != resource.VirtualHostURL {
		return nil
	}
	var vh routev3.VirtualHost
	if err := proto.Unmarshal(v.Body(), &vh); err != nil {
		return nil
	}
	out := make([]string, len(vh.Domains))
	for i, d := range vh.Domains {
		out[i] = strings.ToLower(d)
	}
	return out
}

// indexVirtualHost brings the domain index up to date with a virtual host
// entry's variants.
func (t *table) indexVirtualHost(e *entry) {
	if e.vhds == nil {
		rc := vhdsRouteConfig(e.name)
		if len(e.variants) == 0 {
			return
		}
		e.vhds = t.vhdsNS(rc)
	}
	ns := e.vhds
	for _, d := range e.domains {
		ns.index(e, d, false)
	}
	seen := map[string]bool{}
	var doms []string
	e.variantDomains = make(map[*resource.Variant][]string, len(e.variants))
	for _, v := range e.variants {
		vd := domainsOf(v)
		e.variantDomains[v] = vd
		for _, d := range vd {
			if !seen[d] {
				seen[d] = true
				doms = append(doms, d)
			}
		}
	}
	e.domains = doms
	for _, d := range doms {
		ns.index(e, d, true)
	}
	if len(e.variants) > 0 {
		ns.entries[e] = struct{}{}
	} else {
		delete(ns.entries, e)
	}
}

// ResolveVirtualHost resolves an on-demand VHDS subscription
// "<rc>/<host>": the virtual host stored under that exact name if there is
// one (clients may subscribe by name or by alias), else the one under <rc>/
// whose domains match host best. It returns nil when none does.
func (r *Reader) ResolveVirtualHost(n string, params constraint.Params) *resource.Variant {
	if r.stagesVHDS(vhdsRouteConfig(n)) {
		return r.resolveStaged(n, params)
	}
	t := r.d.tables[resource.VirtualHostURL]
	if t == nil {
		return nil
	}
	if e := t.entries[n]; e != nil {
		if v := e.selectVariant(params); v != nil {
			return v
		}
	}
	rc := vhdsRouteConfig(n)
	ns := t.vhds[rc]
	if ns == nil {
		return nil
	}
	host := strings.ToLower(n[len(rc)+1:])
	try := func(set map[*entry]struct{}, pattern string) *resource.Variant {
		if len(set) == 0 {
			return nil
		}
		es := make([]*entry, 0, len(set))
		for e := range set {
			es = append(es, e)
		}
		sort.Slice(es, func(i, j int) bool { return es[i].name < es[j].name })
		for _, e := range es {
			v := e.selectVariant(params)
			if v == nil {
				continue
			}
			// The index holds the union of all variants' domains; the
			// selected variant must carry the pattern itself.
			for _, d := range e.variantDomains[v] {
				if d == pattern {
					return v
				}
			}
		}
		return nil
	}
	return byPrecedence(ns, host, try)
}

// byPrecedence returns the first variant try finds for host's domain
// patterns in Envoy's order: the exact host, then "*suffix" from the
// longest, then "prefix*" from the longest, then "*". try gets each
// pattern with ns's index set for it; ResolveVirtualHost and
// resolveStaged share the order here so that the two views cannot
// disagree on it (resolveStaged passes an empty vhds: its sets are nil).
func byPrecedence(ns *vhds, host string, try func(set map[*entry]struct{}, pattern string) *resource.Variant) *resource.Variant {
	if v := try(ns.exact[host], host); v != nil {
		return v
	}
	for i := 1; i < len(host); i++ {
		if v := try(ns.suffix[host[i:]], "*"+host[i:]); v != nil {
			return v
		}
	}
	for i := len(host) - 1; i >= 1; i-- {
		if v := try(ns.prefix[host[:i]], host[:i]+"*"); v != nil {
			return v
		}
	}
	return try(ns.any, "*")
}

// stagesVHDS reports whether r is the view outside a staged revision's
// canary and that revision changed a virtual host of route configuration
// rc: then the domain index, which follows the current variants, cannot
// answer for r, and an alias is resolved by resolveStaged.
func (r *Reader) stagesVHDS(rc string) bool {
	return r.stage != nil && r.stage.vhdsRCs[rc]
}

// resolveStaged is ResolveVirtualHost for a view outside a staged
// revision's canary: the same precedence, over the virtual hosts of the
// route configuration as that view reads them (the staged revision's
// changes as they were before it). It looks at each of the route
// configuration's virtual hosts, so it costs more than the index; it is
// used only while a revision that changed one of them is staged.
func (r *Reader) resolveStaged(n string, params constraint.Params) *resource.Variant {
	if v := r.Get(resource.VirtualHostURL, n, params); v != nil {
		return v
	}
	rc := vhdsRouteConfig(n)
	host := strings.ToLower(n[len(rc)+1:])
	type cand struct {
		v       *resource.Variant
		domains []string
	}
	var cands []cand
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if v := r.Get(resource.VirtualHostURL, name, params); v != nil {
			cands = append(cands, cand{v, domainsOf(v)})
		}
	}
	if t := r.d.tables[resource.VirtualHostURL]; t != nil && t.vhds[rc] != nil {
		for e := range t.vhds[rc].entries {
			add(e.name)
		}
	}
	for k := range r.stage.Prev {
		if k.Type == resource.VirtualHostURL && vhdsRouteConfig(k.Name) == rc {
			add(k.Name)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].v.Name < cands[j].v.Name })
	return byPrecedence(&vhds{}, host, func(_ map[*entry]struct{}, pattern string) *resource.Variant {
		for _, c := range cands {
			for _, d := range c.domains {
				if d == pattern {
					return c.v
				}
			}
		}
		return nil
	})
}
