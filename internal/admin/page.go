package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// The web page: what an operator looks at first. It shows the same data as
// the JSON endpoints (which it links to), read once per page load; it is
// rendered on the server, so it works without scripts and tests can read it.

// pageUpstream picks out what the page shows of the value
// Options.Upstream returns (client.Upstream), by its JSON form, so admin
// does not depend on the client package (a relay has a few upstreams).
type pageUpstream struct {
	Servers       []string `json:"servers"`
	Connected     string   `json:"connected"`
	Connecting    string   `json:"connecting"`
	DownSince     string   `json:"down_since"`
	LastError     string   `json:"last_error"`
	Subscriptions int      `json:"subscriptions"`
	Responses     int64    `json:"responses"`
	Resources     int64    `json:"resources"`
	NACKs         int64    `json:"nacks"`
}

// pageResource is one variant with the clients that hold it.
type pageResource struct {
	Resource
	HeldBy []string
}

// pageRevision is one recent revision: what changed, who made it, its
// rollout (the latest pageProgress revisions), and the diff of what
// changed (bounded).
type pageRevision struct {
	store.Revision
	Shown   []store.Change
	Rollout *rollout.Report
	// Progress is the rollout by group (agent and parameters), NACKs the
	// clients that rejected it (at most pageNacks, each on one line).
	Progress []groupProgress
	Nacks    []rollout.Entry
	MoreNack int
	Diffs    []DiffEntry
	More     int // changes not diffed
}

// groupProgress is one group's part of a rollout, drawn as a bar.
type groupProgress struct {
	Agent, Params           string
	Acked, Nacked, Pending  int
	AckedPct, NackedPct     float64
	PendingPct, UnservedPct float64
	Unserved                int
}

// Page bounds: the revisions shown, and the changes listed and diffed in
// each.
const (
	pageRevisions = 10
	pageChanges   = 20
	// pageProgress is how many of the latest revisions show their
	// rollout (each asks the fleet index who the revision concerns).
	pageProgress = 3
	// pageNacks bounds the NACKs listed per revision, pageGroups the
	// groups drawn, pageClients the clients listed per page.
	pageNacks   = 10
	pageGroups  = 50
	pageClients = 50
	// pageResources is how many variants the page lists, in order; past
	// it the page says how many more there are and where to find them.
	pageResources = 1000
)

type pageData struct {
	Role      string
	Ready     bool
	Revision  int64
	Resources []pageResource
	// AllResources counts the variants, MoreResources those not listed.
	AllResources, MoreResources int
	Revisions                   []pageRevision
	Oldest                      int64
	// The fleet: its groups (fleet-wide), and one page of its clients
	// (matching Node, when searched).
	Groups     []fleet.Group
	MoreGroups int
	HasClients bool
	Clients    []protocol.StreamStatus
	Matched    int
	Node       string
	PageNo     int
	Prev, Next string // links to the neighbouring pages, when there are
	// Unreachable are the registered replicas that did not answer: the
	// fleet, the clients and the rollouts shown lack their clients.
	Unreachable []fleet.Unreachable
	Upstreams   []pageUpstream
	HasStore    bool
	Degraded    string
	// Staged is the staged revision's rollout, while one is staged
	// (docs/rollouts.md).
	Staged *rollout.Report
	Errors []string
}

// asJSON fills out from v's JSON form (a relay's few upstreams).
func asJSON(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (a *api) page(w http.ResponseWriter, r *http.Request) {
	d := pageData{Role: "server", Ready: a.o.Ready == nil || a.o.Ready(), HasStore: a.o.Store != nil, Degraded: a.degraded()}
	if a.o.Store == nil {
		d.Role = "relay"
	}
	if a.o.Store != nil || a.o.Resources != nil {
		rec := &discard{header: http.Header{}}
		rev, vs, ok := a.variants(rec, r)
		if !ok {
			d.Errors = append(d.Errors, "resources: "+rec.body.String())
		}
		d.Revision = rev
		vs = sortVariants(vs)
		d.AllResources = len(vs)
		if len(vs) > pageResources {
			d.MoreResources = len(vs) - pageResources
			vs = vs[:pageResources]
		}
		for _, v := range vs {
			d.Resources = append(d.Resources, pageResource{Resource: Resource{Type: v.Type.Name, Name: v.Name,
				Constraints: v.Constraints.String(), Version: v.Version, PayloadType: payloadType(v)}})
		}
	}
	a.pageFleet(r, &d)
	d.heldBy()
	if a.o.Store != nil {
		if err := a.pageRevisions(r, &d); err != nil {
			d.Errors = append(d.Errors, "history: "+err.Error())
		}
	}
	if a.o.Upstream != nil {
		if err := asJSON(a.o.Upstream(), &d.Upstreams); err != nil {
			d.Errors = append(d.Errors, "upstream: "+err.Error())
		}
	}
	var b bytes.Buffer
	if err := pageTemplate().Execute(&b, d); err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// heldBy fills in, for each resource variant, the clients that hold it.
func (d *pageData) heldBy() {
	type key struct{ typ, name, cons string }
	at := map[key]int{}
	for i, r := range d.Resources {
		at[key{r.Type, r.Name, r.Constraints}] = i
	}
	for _, c := range d.Clients {
		node := c.NodeID
		if node == "" {
			node = c.Address
		}
		for _, t := range c.Types {
			// Over SotW a stream is known to have been sent its variants;
			// when it rejected the last response, say so.
			nacked := ""
			if t.LastNack != nil && t.LastNack.Version == t.SentVersion {
				nacked = " (NACKed)"
			}
			for _, h := range t.Held {
				if i, ok := at[key{t.Type, h.Name, h.Constraints}]; ok && !h.Absent {
					d.Resources[i].HeldBy = append(d.Resources[i].HeldBy, node+" @"+h.Version+nacked)
				}
			}
		}
	}
}

// pageRevisions fills in the last revisions, each with its rollout and
// the diff of (the first pageChanges of) its changes.
func (a *api) pageRevisions(r *http.Request, d *pageData) error {
	l, err := a.o.Store.Revisions(r.Context(), store.HistoryQuery{Limit: pageRevisions})
	if err != nil {
		return err
	}
	d.Oldest = l.Oldest
	stagedRev := int64(0)
	if rec, staged, _ := store.StagedIn(l); staged && a.o.Rollout != nil {
		rep := a.stagedRollout(r.Context(), a.fleetRollout(r, rec.Rev, rec.Changes))
		d.Staged, stagedRev = &rep, rec.Rev
	}
	for _, rev := range l.Revisions {
		pr := pageRevision{Revision: rev, Shown: rev.Changes}
		if len(pr.Shown) > pageChanges {
			pr.Shown, pr.More = pr.Shown[:pageChanges], len(rev.Changes)-pageChanges
		}
		if a.o.Rollout != nil && len(d.Revisions) < pageProgress {
			var rep rollout.Report
			if d.Staged != nil && rev.Rev == stagedRev {
				rep = *d.Staged // asked above: ask the replicas once
			} else {
				rep = a.fleetRollout(r, rev.Rev, rev.Changes)
				if rev.Audit.Stage != nil && rev.Audit.Stage.State == store.StateStaged {
					rep = a.stagedRollout(r.Context(), rep)
				}
			}
			d.unreachable(rep.Unreachable)
			pr.Rollout = &rep
			pr.Progress, pr.Nacks, pr.MoreNack = progress(rep)
		}
		if rev.Rev-1 >= l.Oldest {
			seen := map[store.Filter]bool{}
			for _, c := range pr.Shown {
				f := store.Filter{Type: c.Key.Type, Name: c.Key.Name}
				if seen[f] {
					continue
				}
				seen[f] = true
				before, err := a.o.Store.StateAt(r.Context(), rev.Rev-1, f)
				if err != nil {
					return err
				}
				after, err := a.o.Store.StateAt(r.Context(), rev.Rev, f)
				if err != nil {
					return err
				}
				pr.Diffs = append(pr.Diffs, DiffStates(before, after, fmt.Sprint("revision ", rev.Rev-1), fmt.Sprint("revision ", rev.Rev))...)
			}
		}
		d.Revisions = append(d.Revisions, pr)
	}
	return nil
}

// pageFleet fills in the groups and the page of clients asked for
// (?node=, a substring of node ids, and ?page=, from 1).
func (a *api) pageFleet(r *http.Request, d *pageData) {
	if a.o.Groups != nil {
		gs, failed, err := a.fleetGroups(r)
		if err != nil {
			d.Errors = append(d.Errors, "groups: "+err.Error())
		}
		d.unreachable(failed)
		if len(gs) > pageGroups {
			d.MoreGroups = len(gs) - pageGroups
			gs = gs[:pageGroups]
		}
		d.Groups = gs
	}
	if a.o.Page == nil {
		return
	}
	d.HasClients = true
	d.Node = r.URL.Query().Get("node")
	d.PageNo = 1
	if n, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && n > 1 {
		d.PageNo = n
	}
	p, err := a.fleetPage(r, protocol.ClientQuery{Node: d.Node, Offset: (d.PageNo - 1) * pageClients, Limit: pageClients})
	if err != nil {
		d.Errors = append(d.Errors, "clients: "+err.Error())
		return
	}
	d.unreachable(p.Unreachable)
	d.Clients, d.Matched = p.Clients, p.Matched
	link := func(n int) string {
		q := url.Values{"page": {strconv.Itoa(n)}}
		if d.Node != "" {
			q.Set("node", d.Node)
		}
		return "/?" + q.Encode()
	}
	if d.PageNo > 1 {
		d.Prev = link(d.PageNo - 1)
	}
	if d.PageNo*pageClients < d.Matched {
		d.Next = link(d.PageNo + 1)
	}
}

// unreachable notes replicas that did not answer, each once.
func (d *pageData) unreachable(un []fleet.Unreachable) {
	for _, u := range un {
		if !slices.ContainsFunc(d.Unreachable, func(o fleet.Unreachable) bool { return o.Replica == u.Replica }) {
			d.Unreachable = append(d.Unreachable, u)
		}
	}
}

// progress sums a rollout up by group (agent and node parameters), and
// picks the NACKs to list.
func progress(rep rollout.Report) (gs []groupProgress, nacks []rollout.Entry, more int) {
	at := map[string]int{}
	for _, e := range rep.Entries {
		params := paramsText(e.Params)
		k := e.Agent + "\x00" + params
		i, ok := at[k]
		if !ok {
			i = len(gs)
			at[k] = i
			gs = append(gs, groupProgress{Agent: e.Agent, Params: params})
		}
		g := &gs[i]
		switch e.State {
		case rollout.Acked:
			g.Acked++
		case rollout.Nacked:
			g.Nacked++
			if len(nacks) < pageNacks {
				nacks = append(nacks, e)
			} else {
				more++
			}
		case rollout.Unserved:
			g.Unserved++
		default:
			g.Pending++
		}
	}
	for i := range gs {
		g := &gs[i]
		n := float64(g.Acked + g.Nacked + g.Pending + g.Unserved)
		g.AckedPct, g.NackedPct = 100*float64(g.Acked)/n, 100*float64(g.Nacked)/n
		g.PendingPct, g.UnservedPct = 100*float64(g.Pending)/n, 100*float64(g.Unserved)/n
	}
	sort.Slice(gs, func(i, j int) bool {
		if gs[i].Agent != gs[j].Agent {
			return gs[i].Agent < gs[j].Agent
		}
		return gs[i].Params < gs[j].Params
	})
	if len(gs) > pageGroups {
		gs = gs[:pageGroups]
	}
	return gs, nacks, more
}

func payloadType(v *resource.Variant) string {
	if v.PayloadURL != v.Type.URL {
		return v.PayloadURL
	}
	return ""
}

// discard is a ResponseWriter that keeps what an endpoint would have
// written, for the page to show an error in place.
type discard struct {
	header http.Header
	body   bytes.Buffer
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return d.body.Write(b) }
func (d *discard) WriteHeader(int)             {}

// pageTemplate is parsed on the page's first request, not when the
// binary starts: every xdsd command, a one-cluster `xdsd apply` too,
// would otherwise parse it (0.5 ms of CPU, 2,700 allocations).
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{
		// resourceURL links a resource's JSON; its query is encoded here, so
		// the template may take it as a URL.
		// kind names a type as people say it ("cluster"), so that the
		// revisions list tells apart resources of one name and several types.
		"kind": refs.Kind,
		"resourceURL": func(typ, name string) template.URL {
			return template.URL("/v1/resources?" + url.Values{"type": {typ}, "name": {name}}.Encode())
		},
		"since": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return time.Since(t).Round(time.Second).String()
		},
	}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>xdsd {{.Role}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border-bottom:1px solid #ddd;padding:.25em .75em;text-align:left;vertical-align:top}
th{background:#f4f4f4}
code{font-size:13px}
.bad{color:#b00}
code,.wrap{overflow-wrap:anywhere;word-break:break-word}
td{max-width:28em}
.banner{background:#fdd;border:1px solid #b00;padding:.5em 1em}
.muted{color:#777}
.group{white-space:nowrap;font-size:12px}
.bar{display:inline-flex;width:10em;height:.8em;background:#eee;vertical-align:middle}
.bar .ack{background:#3a3}.bar .nack{background:#c33}.bar .pend{background:#bbb}
.nackline{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:40em}
pre.diff{font-size:12px;background:#f8f8f8;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere;max-width:60em}
</style></head>
<body>
<h1>xdsd {{.Role}}</h1>
<p>{{if .Ready}}ready{{else}}<span class="bad">not ready</span>{{end}}{{if .HasStore}} · revision {{.Revision}}{{end}}
· <a href="/metrics">metrics</a> · <a href="/v1/resources">resources (JSON)</a> · <a href="/v1/clients">clients (JSON)</a>{{if not .HasStore}} · <a href="/v1/upstream">upstream (JSON)</a>{{end}}</p>
{{if .Degraded}}<p class="banner">degraded: {{.Degraded}}</p>{{end}}
{{with .Staged}}<p class="banner" id="staged">revision {{.Revision}} is STAGED for the canary {{.Stage.Canary}}{{if .Stage.BakeEnds}} (the server promotes it at {{.Stage.BakeEnds.Format "15:04:05Z07:00"}} if a canary client ACKed and none NACKed){{end}}: canary clients {{.Acked}} ACKed, {{.Nacked}} NACKed, {{.Pending}} pending.{{if .Stage.HeldOff}} The bake is over, but the server holds off promoting it: {{.Stage.HeldOff}}.{{end}} <code>xdsd rollout promote {{.Revision}}</code> or <code>xdsd rollout abort {{.Revision}}</code></p>{{end}}
{{range .Errors}}<p class="bad">{{.}}</p>{{end}}
{{if .Unreachable}}<div class="banner" id="unreachable">{{len .Unreachable}} registered replica{{if gt (len .Unreachable) 1}}s{{end}} did not answer: the fleet, clients and rollouts below lack {{if gt (len .Unreachable) 1}}their{{else}}its{{end}} clients.
{{range .Unreachable}}<div class="nackline" title="{{.Error}}">replica <code>{{.Replica}}</code>: {{.Error}}</div>{{end}}</div>{{end}}
{{if not .HasStore}}
<h2>Upstream</h2>
{{if .Upstreams}}<table><tr><th>servers</th><th>connected to</th><th>subscriptions</th><th>responses</th><th>resources</th><th>NACKs</th><th>last error</th></tr>
{{range .Upstreams}}<tr><td>{{range .Servers}}<code>{{.}}</code> {{end}}</td>
<td>{{if .Connected}}<code>{{.Connected}}</code>{{else}}<span class="bad">down{{if .DownSince}} since {{.DownSince}}{{end}}</span>{{if .Connecting}} (trying <code>{{.Connecting}}</code>){{end}}{{end}}</td>
<td>{{.Subscriptions}}</td><td>{{.Responses}}</td><td>{{.Resources}}</td><td>{{.NACKs}}</td><td class="bad">{{.LastError}}</td></tr>
{{end}}</table>{{else}}<p class="muted">no upstream stream yet (one opens with the first subscription)</p>{{end}}
{{end}}
{{if .Groups}}<h2>Fleet</h2>
<table id="groups"><tr><th>agent</th><th>parameters</th><th>clients</th><th>for example</th><th>holds (first client, per type)</th></tr>
{{range .Groups}}<tr><td>{{.Agent}}</td><td>{{range $k, $v := .Params}}<span class="muted">{{$k}}={{$v}}</span> {{else}}<span class="muted">none</span>{{end}}</td><td>{{.Count}}</td>
<td>{{range .Nodes}}<code>{{.}}</code> {{end}}</td><td class="wrap">{{range .Holds}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>{{if .MoreGroups}}<p class="muted">… and {{.MoreGroups}} more groups: <a href="/v1/groups">all as JSON</a></p>{{end}}{{end}}
{{if .HasClients}}<h2>Clients ({{.Matched}}{{if .Node}} matching <code>{{.Node}}</code>{{end}})</h2>
<form method="get" action="/"><input name="node" value="{{.Node}}" placeholder="node id contains…"> <button>search</button>{{if .Node}} <a href="/">all</a>{{end}}</form>
{{if .Clients}}<table id="clients"><tr><th>node</th><th>replica</th><th>address</th><th>stream</th><th>connected</th><th>type</th><th>subscriptions</th><th>holds (variant, version)</th><th>sent</th><th>ACKed</th><th>NACKs</th></tr>
{{range .Clients}}{{$c := .}}{{range $i, $t := .Types}}<tr>{{if eq $i 0}}<td><code>{{$c.NodeID}}</code>{{if $c.Identity}}<br><span class="muted">{{$c.Identity}}</span>{{end}}{{range $k, $v := $c.Params}}<br><span class="muted">{{$k}}={{$v}}</span>{{end}}</td><td class="replica">{{if $c.Replica}}<code>{{$c.Replica}}</code>{{else}}<span class="muted">this one</span>{{end}}</td><td>{{$c.Address}}</td><td>{{$c.Kind}}<br><span class="muted">{{$c.Agent}}</span></td><td>{{since $c.Connected}}</td>{{else}}<td></td><td></td><td></td><td></td><td></td>{{end}}
<td>{{$t.Type}}</td><td>{{range $t.Subscriptions}}<code>{{if .Name}}{{.Name}}{{else}}(wildcard){{end}}</code>{{range $k, $v := .Params}} <span class="muted">{{$k}}={{$v}}</span>{{end}}<br>{{end}}</td>
<td>{{range $t.Held}}<code>{{.Name}}</code>{{if .Absent}} <span class="muted">does not exist</span>{{else}}{{if .Constraints}} <span class="muted">[{{.Constraints}}]</span>{{end}} @{{.Version}}{{end}}<br>{{end}}</td>
<td>{{$t.SentVersion}}</td><td>{{$t.AckedVersion}}</td><td class="wrap">{{if $t.LastNack}}<span class="bad">{{$t.Nacks}}: rejected version {{$t.LastNack.Version}}{{if $t.LastNack.LastGood}} (holds {{$t.LastNack.LastGood}}){{end}}: {{$t.LastNack.Error}}</span>{{else}}{{$t.Nacks}}{{end}}</td></tr>
{{else}}<tr><td><code>{{$c.NodeID}}</code></td><td class="replica">{{if $c.Replica}}<code>{{$c.Replica}}</code>{{else}}<span class="muted">this one</span>{{end}}</td><td>{{$c.Address}}</td><td>{{$c.Kind}}</td><td>{{since $c.Connected}}</td><td colspan="6" class="muted">no request yet</td></tr>
{{end}}{{end}}</table>
<p>{{if .Prev}}<a href="{{.Prev}}">← previous</a> {{end}}page {{.PageNo}}{{if .Next}} <a href="{{.Next}}">next →</a>{{end}}</p>{{else}}<p class="muted">{{if .Node}}no client matches{{else}}no client connected{{end}}</p>{{end}}{{end}}
<h2>Resources ({{.AllResources}})</h2>
{{if .Resources}}<table id="resources"><tr><th>type</th><th>name</th><th>constraints</th><th>version</th><th>held by</th></tr>
{{range .Resources}}<tr><td>{{.Type}}</td><td><a href="{{resourceURL .Type .Name}}"><code>{{.Name}}</code></a>{{if .PayloadType}} <span class="muted">→ {{.PayloadType}}</span>{{end}}</td><td><code>{{.Constraints}}</code></td><td>{{.Version}}</td>
<td class="holders">{{range .HeldBy}}<code>{{.}}</code><br>{{else}}<span class="muted">no client</span>{{end}}</td></tr>
{{end}}</table>{{if .MoreResources}}<p class="muted" id="more-resources">… and {{.MoreResources}} more, not listed here: <a href="/v1/resources">all as JSON</a></p>{{end}}{{else}}<p class="muted">none</p>{{end}}
{{if .HasStore}}<h2>Recent revisions</h2>
{{if .Revisions}}<table id="revisions"><tr><th>revision</th><th>when, who</th><th>changes</th><th>rollout</th></tr>
{{range .Revisions}}<tr class="revision"><td>{{.Rev}}</td><td>{{.Time.Format "2006-01-02 15:04:05Z07:00"}}<br><span class="muted">{{if .Audit.Who}}{{.Audit.Who}}{{else}}(anonymous){{end}}{{if .Audit.From}} from {{.Audit.From}}{{end}}{{if .Audit.Via}} via {{.Audit.Via}}{{end}}</span>{{with .Audit.Stage}}<br><span class="staged">{{if eq .State "staged"}}staged for the canary {{.Canary}}{{else}}{{.State}} staged revision {{.Of}}{{if .Reason}}: {{.Reason}}{{end}}{{end}}</span>{{end}}</td>
<td>{{range .Shown}}{{.Op}} {{kind .Key.Type}} <code>{{.Key.Name}}</code>{{if .Key.Constraints}} <span class="muted">[{{.Key.Constraints}}]</span>{{end}}<br>{{end}}{{if .More}}<span class="muted">… and {{.More}} more</span>{{end}}
{{if .Diffs}}<details><summary>diff</summary>{{range .Diffs}}<pre class="diff">{{.Diff}}</pre>{{end}}</details>{{end}}</td>
<td class="wrap">{{$r := .}}{{with .Rollout}}{{if or .Acked .Nacked .Pending}}{{.Acked}} ACKed, {{if .Nacked}}<span class="bad">{{.Nacked}} NACKed</span>{{else}}0 NACKed{{end}}, {{.Pending}} pending
{{range $r.Progress}}<div class="group"><span class="muted">{{.Agent}} {{.Params}}</span> <span class="bar" title="{{.Acked}} ACKed, {{.Nacked}} NACKed, {{.Pending}} pending"><span class="ack" style="width:{{.AckedPct}}%"></span><span class="nack" style="width:{{.NackedPct}}%"></span><span class="pend" style="width:{{.PendingPct}}%"></span></span> {{.Acked}}/{{.Nacked}}/{{.Pending}}</div>{{end}}
{{range $r.Nacks}}<div class="nackline bad" title="{{.Error}}"><code>{{.Node}}</code>{{if .Replica}} (replica {{.Replica}}){{end}} rejected {{.Version}}: {{.Error}}</div>{{end}}{{if $r.MoreNack}}<span class="muted">… and {{$r.MoreNack}} more NACKs: <a href="/v1/rollout?rev={{$r.Rev}}">all as JSON</a></span>{{end}}{{else}}<span class="muted">no client concerned</span>{{end}}{{else}}<a href="/v1/rollout?rev={{.Rev}}">rollout (JSON)</a>{{end}}</td></tr>
{{end}}</table>
{{if gt .Oldest 0}}<p class="muted">history kept from revision {{.Oldest}} (serve --history)</p>{{end}}
{{else}}<p class="muted">no revision yet</p>{{end}}{{end}}
</body></html>
`))
})
