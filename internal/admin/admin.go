package admin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/redact"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/tuning"
	"github.com/xdsd/xdsd/resource"
)

// Options configure the handler. Every field is optional; a missing one
// turns its endpoints off (a relay has no store to apply to).
type Options struct {
	// Store backs /v1/resources, /v1/apply and DELETE /v1/resources.
	Store store.Store
	// Resources lists what GET /v1/resources shows when there is no Store
	// (a relay's cache).
	Resources func(ctx context.Context) (rev int64, vs []*resource.Variant, err error)
	// Ready reports readiness for /readyz.
	Ready func() bool
	// Degraded, when it returns a non-empty reason, marks a ready process
	// that is not doing all it should (a watched directory whose last
	// change failed to apply): /readyz and the page say so, while the
	// process keeps serving its last good state.
	Degraded func() string
	// Served waits until the xDS side serves a store revision. An apply or
	// delete answers once its revision is served, so a client that asks
	// after `xdsd apply` returns gets what was applied.
	Served func(ctx context.Context, rev int64) error
	// Gatherer serves /metrics (prometheus.DefaultGatherer when nil).
	Gatherer prometheus.Gatherer
	// Clients returns the value /v1/clients shows as JSON.
	Clients func() any
	// Concerned returns this process's connected clients subscribed to
	// the resources named, each with only those resources' state
	// (protocol.Server.Concerned): the stranded-client guard asks it, and
	// the other replicas (POST /v1/concerned).
	Concerned func(ctx context.Context, ch protocol.Changed) ([]protocol.StreamStatus, error)
	// Replicas, when set, lists the other live replicas sharing the
	// store: their admin API URLs by name. Then /v1/clients, /v1/groups,
	// /v1/rollout, the page, the stranded-client guard and the checks of
	// client=auto answer for every replica, asking the others
	// (replicas.go).
	Replicas func(ctx context.Context) (map[string]string, error)
	// PeerClient asks the other replicas (PeerClient(nil), trusting the
	// system's roots, when nil); PeerToken, when set, returns the bearer
	// token to present to them (xdsd serve --admin-peer-token-file) in
	// place of the caller's Authorization header.
	PeerClient *http.Client
	PeerToken  func() (string, error)
	// Page returns one page of this process's connected clients (the
	// admin page's list: a search by node id, and a window of the
	// matches); the admin API adds the other replicas'.
	Page func(ctx context.Context, q protocol.ClientQuery) (protocol.ClientPage, error)
	// Groups returns this process's connected clients by agent and
	// parameter set; the admin API adds the other replicas' for GET
	// /v1/groups, the page and what the checks of client=auto check for.
	Groups func(ctx context.Context) ([]fleet.Group, error)
	// Upstream returns the value /v1/upstream shows as JSON (a relay's
	// upstream streams).
	Upstream func() any
	// Owned, when set, maps each variant a watched directory defines to
	// the file that defines it. An apply or delete that touches such a
	// resource is refused (409) unless forced (?force=true): the
	// directory's next change would undo it.
	Owned func(ctx context.Context) (map[resource.Key]string, error)
	// Limits bound the writes in progress.
	Limits Limits
	// Registerer receives the handler's own metrics (none when nil).
	Registerer prometheus.Registerer
	// Logger logs applies and deletes.
	Logger *slog.Logger
	// Identity, when set, names the writer of a request for the audit
	// record of what it changes (an admin token's name, a client
	// certificate's identity), or "".
	Identity func(*http.Request) string
	// Rollout reports which clients the changes of revision rev concern,
	// and what each answered: GET /v1/rollout (xdsd apply --wait).
	Rollout func(rev int64, changes []store.Change) rollout.Report
	// StageHold, when set, says why the server holds off promoting the
	// baked staged revision rev ("" when it does not): GET /v1/rollout
	// reports it as stage.held_off (origin.Server.StageHold).
	StageHold func(rev int64) string
	// Export writes a backup of a store that cannot copy itself (etcd) as
	// a bolt store file: GET /v1/backup.
	Export func(ctx context.Context, w io.Writer) (rev int64, err error)
	// MaxBatchBytes bounds the body of an apply (DefaultMaxBatchBytes when
	// zero): xdsd serve --max-batch-bytes.
	MaxBatchBytes int64
	// Tokens, when set, are credentials the API asks for (auth.go).
	// Without Tokens and CertAccess the API asks for none, and answers
	// only requests naming it by a loopback or allowed Host (DNS
	// rebinding).
	Tokens *Tokens
	// CertAccess, when set, says what a verified client certificate
	// allows (and whom to name for it): the policy's admin roles and
	// --admin-client-ca. Set, it makes the API ask for credentials.
	CertAccess func(*tls.ConnectionState) (who string, a Access)
	// Hosts are the names, besides loopback addresses, "localhost" and
	// the address a connection reached, that a request asking for no
	// credentials may name in its Host (--admin-host).
	Hosts []string
	// CheckIndex, when set, is the index of the stored variants that
	// the applies' client checks use, for the process to build ahead of
	// the first apply (CheckIndex.Build: xdsd serve, at its start); nil,
	// the first apply builds its own.
	CheckIndex *CheckIndex
	// Memory, when set, steers the process's GOGC while applies run
	// (tuning.Process(): xdsd serve); nil leaves the runtime alone.
	Memory *tuning.Memory
}

// DefaultMaxBatchBytes is the largest apply body taken by default: twice
// a mesh of 100,000 clusters written as JSON.
const DefaultMaxBatchBytes = 256 << 20

// Handler returns the admin HTTP handler.
func Handler(o Options) http.Handler {
	if o.Identity == nil {
		// Who the credentials checked by protect say made the request.
		o.Identity = func(r *http.Request) string { return Who(r.Context()) }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.DefaultGatherer
	}
	a := &api{o: o, checks: o.CheckIndex}
	if a.checks == nil {
		a.checks = NewCheckIndex() // built by the first apply
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.page)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", a.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/resources", a.list)
	gate := newWriteGate(o.Limits, o.Registerer)
	mux.HandleFunc("POST /v1/apply", gate.admit(a.apply))
	mux.HandleFunc("DELETE /v1/resources", gate.admit(a.delete))
	mux.HandleFunc("GET /v1/clients", a.clients)
	mux.HandleFunc("GET /v1/clients/page", a.clientPage)
	mux.HandleFunc("POST /v1/concerned", a.concerned)
	mux.HandleFunc("GET /v1/groups", a.groups)
	mux.HandleFunc("GET /v1/history", a.history)
	// The audit trail (who, from where, when, which revision, what
	// changed) is the history's records, under the name security reviews
	// look for.
	mux.HandleFunc("GET /v1/audit", a.history)
	mux.HandleFunc("GET /v1/diff", a.diff)
	mux.HandleFunc("GET /v1/rollout", a.rollout)
	mux.HandleFunc("GET /v1/backup", a.backup)
	mux.HandleFunc("POST /v1/rollback", gate.admit(a.rollback))
	mux.HandleFunc("POST /v1/rollout/promote", gate.admit(a.closeStage(store.StatePromoted)))
	mux.HandleFunc("POST /v1/rollout/abort", gate.admit(a.closeStage(store.StateAborted)))
	// Go's profiler, for an operator chasing CPU or memory.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /v1/upstream", func(w http.ResponseWriter, r *http.Request) {
		if a.o.Upstream == nil {
			writeJSON(w, http.StatusOK, []any{})
			return
		}
		writeJSON(w, http.StatusOK, a.o.Upstream())
	})
	return protect(o, mux)
}

// stored is what the applies' client checks keep of the stored variants.
func (a *api) stored() *storedSummaries { return &a.checks.s }

type api struct {
	o      Options
	checks *CheckIndex // o.CheckIndex, or the API's own
	// silent is when each replica that did not answer was last logged
	// (replicas.go).
	silent sync.Map

	stagedMu sync.Mutex
	stagedAt *stagedCache // stagedNow's last answer
}

// ready answers /readyz: 503 until ready; then 200 "ok", or 200
// "degraded: reason" — still serving, so still ready, but an operator's
// attention is needed.
func (a *api) ready(w http.ResponseWriter, r *http.Request) {
	if a.o.Ready != nil && !a.o.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if d := a.degraded(); d != "" {
		io.WriteString(w, "degraded: "+d+"\n")
		return
	}
	io.WriteString(w, "ok\n")
}

func (a *api) degraded() string {
	var why []string
	if a.o.Degraded != nil {
		if d := a.o.Degraded(); d != "" {
			why = append(why, d)
		}
	}
	if a.o.Tokens != nil {
		if d := a.o.Tokens.revoked(a.o.Logger); d != "" {
			why = append(why, d)
		}
	}
	return strings.Join(why, "; ")
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Message string     `json:"message"`
	Errors  []DocError `json:"errors,omitempty"`
}

// DocError is one bad document of an apply, or one thing in it a client
// would reject (then Rule is set).
type DocError struct {
	Source   string `json:"source,omitempty"`
	Document int    `json:"document,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Path     string `json:"path,omitempty"`
	Message  string `json:"message"`
	// Resource, Rule and Warning describe a client check's finding:
	// "route r", "grpc/http-filters"; a warning does not stop an apply.
	Resource string `json:"resource,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Warning  bool   `json:"warning,omitempty"`
}

// Error renders it as the command line prints it.
func (e DocError) Error() string {
	d := &resource.DocError{Source: e.Source, Index: e.Document, Line: e.Line, Column: e.Column, Path: e.Path, Msg: e.Message}
	if e.Rule == "" {
		return d.Error()
	}
	f := clientcheck.Finding{DocError: d, Resource: e.Resource, Rule: e.Rule}
	if e.Warning {
		f.Severity = clientcheck.Warning
	}
	return f.String()
}

func docError(e *resource.DocError) DocError {
	return DocError{Source: e.Source, Document: e.Index, Line: e.Line, Column: e.Column, Path: e.Path, Message: e.Msg}
}

func findingError(f clientcheck.Finding) DocError {
	d := docError(f.DocError)
	d.Resource, d.Rule, d.Warning = f.Resource, f.Rule, f.Severity == clientcheck.Warning
	return d
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // constraints read "env=prod && v=1", not "\u0026\u0026"
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	body := ErrorBody{Message: err.Error()}
	var (
		list resource.ErrorList
		rej  *rejected
	)
	switch {
	case errors.As(err, &list):
		body.Message = fmt.Sprintf("%d invalid document(s); nothing was applied", len(list))
		for _, e := range list {
			body.Errors = append(body.Errors, docError(e))
		}
	case errors.As(err, &rej):
		for _, f := range rej.findings {
			body.Errors = append(body.Errors, findingError(f))
		}
	}
	writeJSON(w, code, body)
}

// Resource is one variant as /v1/resources shows it.
type Resource struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Constraints string          `json:"constraints,omitempty"`
	Version     string          `json:"version"`
	PayloadType string          `json:"payload_type,omitempty"` // set for redirects
	TTL         string          `json:"ttl,omitempty"`          // Resource.ttl, when the variant has one
	Resource    json.RawMessage `json:"resource,omitempty"`
	Error       string          `json:"error,omitempty"` // when the payload cannot be shown
}

// ResourceList is the body of GET /v1/resources.
type ResourceList struct {
	Revision  int64      `json:"revision"`
	Resources []Resource `json:"resources"`
}

// Render turns a variant into its admin form, the payload as proto JSON.
func Render(v *resource.Variant) Resource {
	r := Resource{Type: v.Type.Name, Name: v.Name, Constraints: v.Constraints.String(), Version: v.Version}
	if v.TTL > 0 {
		r.TTL = v.TTL.String()
	}
	if v.PayloadURL != v.Type.URL {
		r.PayloadType = v.PayloadURL
	}
	m, err := v.Message()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	// Secrets (udpa.annotations.sensitive fields) show as digests in
	// every output built from here: /v1/resources, diffs, xdsd get.
	js, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(redact.Message(m))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Resource = js
	return r
}

// variants reads what this process holds: its store's contents, or a
// relay's cache. ok is false (and the error written) if it cannot.
func (a *api) variants(w http.ResponseWriter, r *http.Request) (rev int64, vs []*resource.Variant, ok bool) {
	switch {
	case a.o.Store != nil:
		cs, err := a.o.Store.Changes(r.Context(), store.FromStart)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return 0, nil, false
		}
		return cs.Rev, cs.Puts, true
	case a.o.Resources != nil:
		rev, vs, err := a.o.Resources(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return 0, nil, false
		}
		return rev, vs, true
	}
	writeError(w, http.StatusNotFound, errors.New("this process holds no resources"))
	return 0, nil, false
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	rev, vs, ok := a.variants(w, r)
	if !ok {
		return
	}
	f, err := parseFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	var sel []*resource.Variant
	for _, v := range vs {
		if f.match(v) {
			sel = append(sel, v)
		}
	}
	writeResourceList(w, rev, sortVariants(sel))
}

// sortVariants orders variants by type, name and constraints.
func sortVariants(vs []*resource.Variant) []*resource.Variant {
	type entry struct {
		typ, name, cons string
		v               *resource.Variant
	}
	es := make([]entry, len(vs))
	for i, v := range vs {
		es[i] = entry{v.Type.Name, v.Name, v.Constraints.String(), v}
	}
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.cons < b.cons
	})
	out := make([]*resource.Variant, len(es))
	for i, e := range es {
		out[i] = e.v
	}
	return out
}

// writeResourceList writes what writeJSON writes of a ResourceList of
// vs, rendering one variant at a time: a store of 100,000 clusters took
// the server from 180 MB to 2.4 GB when every rendered resource was held
// at once, and the answer was 340 MB.
func writeResourceList(w http.ResponseWriter, rev int64, vs []*resource.Variant) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("    ", "  ")
	enc.SetEscapeHTML(false) // as writeJSON
	fmt.Fprintf(bw, "{\n  \"revision\": %d,\n  \"resources\": [", rev)
	for i, v := range vs {
		buf.Reset()
		if err := enc.Encode(Render(v)); err != nil {
			// A Resource always encodes; were it not to, the answer
			// would be cut short (invalid JSON) rather than wrong.
			return
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	if len(vs) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]\n}\n")
	bw.Flush()
}

type filter struct {
	typ, name   string
	constraints *string
}

func parseFilter(r *http.Request) (filter, error) {
	var f filter
	q := r.URL.Query()
	if t := q.Get("type"); t != "" {
		typ, err := resource.Lookup(t)
		if err != nil {
			return f, err
		}
		f.typ = typ.URL
	}
	if n := q.Get("name"); n != "" {
		c, err := resource.CanonicalName(n)
		if err != nil {
			return f, err
		}
		f.name = c
	}
	if q.Has("constraints") {
		c, err := constraint.Parse(q.Get("constraints"))
		if err != nil {
			return f, err
		}
		k := c.Key()
		f.constraints = &k
	}
	return f, nil
}

func (f filter) match(v *resource.Variant) bool {
	return (f.typ == "" || v.Type.URL == f.typ) && (f.name == "" || v.Name == f.name) &&
		(f.constraints == nil || v.Constraints.Key() == *f.constraints)
}

// ApplyResult is the body of a successful apply or delete.
type ApplyResult struct {
	Revision int64 `json:"revision"`
	// Changed and Deleted name the variants; with ?list=N, at most N of
	// each (the counts say how many there are).
	Changed      []string `json:"changed"`
	Deleted      []string `json:"deleted"`
	ChangedCount int      `json:"changed_count"`
	DeletedCount int      `json:"deleted_count"`
	// Findings are what the client checks found in an apply that went
	// ahead: warnings, and errors it was forced past.
	Findings []DocError `json:"findings,omitempty"`
}

func result(r store.Result) ApplyResult {
	out := ApplyResult{Revision: r.Rev, Changed: []string{}, Deleted: []string{}, ChangedCount: len(r.Puts), DeletedCount: len(r.Deletes)}
	for _, k := range r.Puts {
		out.Changed = append(out.Changed, keyString(k))
	}
	for _, k := range r.Deletes {
		out.Deleted = append(out.Deleted, keyString(k))
	}
	return out
}

func keyString(k resource.Key) string {
	s := resource.ForURL(k.Type).Name + " " + k.Name
	if k.Constraints != "" {
		s += " [" + k.Constraints + "]"
	}
	return s
}

func (a *api) apply(w http.ResponseWriter, r *http.Request) {
	if a.o.Store == nil {
		writeError(w, http.StatusNotFound, errors.New("this process has no store to apply to"))
		return
	}
	// Until the revision is served (internal/tuning); a small body
	// leaves GOGC alone.
	checks := r.URL.Query().Get("client") != "" && r.URL.Query().Get("client") != "none"
	gc := a.o.Memory.BeginBody(r.ContentLength, checks)
	defer gc.End()
	r, ph := withPhases(r)
	start := ph.start
	b := &batch{dryRun: r.URL.Query().Get("dry_run") == "true"}
	if b.dryRun {
		a.dryRun(w, r, b)
		return
	}
	stage, err := stageParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	// Refused before its body is read while a revision is staged; a
	// canary apply commits only on the revision it was checked at.
	what := "apply"
	if stage != nil {
		what = "other canary apply"
	}
	at, ok := a.unstagedRev(w, r, what)
	if !ok {
		return
	}
	ph.mark("staged")
	apply := a.o.Store.Apply
	if s, ok := a.o.Store.(store.Prewriter); ok {
		// The store writes the batch's payloads while the rest is read.
		b.prewrite = s.Prewrite(r.Context())
		defer b.prewrite.Close()
		apply = b.prewrite.Apply
	}
	status, err := a.readBatch(w, r, b)
	if err != nil {
		writeError(w, status, err)
		return
	}
	if !a.watchGuard(w, r, b.batch) {
		return
	}
	warn, ok := a.guard(w, r, b.batch)
	if !ok {
		return
	}
	ph.mark("guard")
	docs, findings, notes := len(b.batch.Puts), b.findings, append(b.notes, warn...)
	b.batch.Audit = a.audit(r, "apply")
	if stage != nil {
		b.batch.Audit.Via = "apply --canary " + stage.Canary
		b.batch.Audit.Stage = stage
		b.batch.IfRev = at
		store.MarkStage(&b.batch)
	}
	b.batch.Owned = true // (decoded for this apply: nothing else holds its variants)
	gc.Storing()
	read := time.Since(start)
	batch := b.batch
	b = nil // a large batch is the store's (and the server's) now
	var res store.Result
	if stage != nil {
		res, err = apply(r.Context(), batch)
	} else {
		res, err = a.applyUnstaged(r.Context(), batch, at, what, apply)
	}
	stored := time.Since(start) - read
	ph.mark("commit")
	if err != nil {
		code := http.StatusInternalServerError
		var be *store.BatchError
		if errors.As(err, &be) {
			code = http.StatusBadRequest
		}
		var se *StagedError
		if errors.Is(err, store.ErrConflict) || errors.As(err, &se) {
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	a.o.Logger.Info("applied", "by", Who(r.Context()), "from", r.RemoteAddr, "revision", res.Rev, "documents", docs, "changed", len(res.Puts), "deleted", len(res.Deletes), "findings", len(findings),
		"read", read.Round(time.Millisecond), "stored", stored.Round(time.Millisecond))
	a.waitServed(r.Context(), res.Rev)
	ph.mark("served")
	a.o.Logger.Debug("apply served", "revision", res.Rev, "took", time.Since(start).Round(time.Millisecond), ph.attr())
	var fs []DocError
	for _, f := range findings {
		fs = append(fs, findingError(f))
	}
	ph.setHeader(w)
	writeApplyResult(w, res, append(fs, notes...), listLimit(r))
}

// listLimit is the ?list=N of an apply or delete: how many variants of
// each list its answer names (-1: all). The CLI prints 100 of a batch's
// 100,000: naming them all took a fifth of a second to write and read.
func listLimit(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("list"))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// writeApplyResult writes what writeJSON writes of the ApplyResult of r
// and findings, a key at a time: a batch of 100,000 resources is answered
// with 100,000 keys, which are then neither held as strings nor as the
// whole JSON document at once. It names at most list keys of each list
// (all if list < 0).
func writeApplyResult(w http.ResponseWriter, r store.Result, findings []DocError, list int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	var str bytes.Buffer
	enc := json.NewEncoder(&str)
	enc.SetEscapeHTML(false) // as writeJSON
	keys := func(name string, ks []resource.Key) {
		if list >= 0 && len(ks) > list {
			ks = ks[:list]
		}
		fmt.Fprintf(bw, "  %q: [", name)
		for i, k := range ks {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.WriteString("\n    ")
			str.Reset()
			enc.Encode(keyString(k)) // a string always encodes
			bw.Write(bytes.TrimSuffix(str.Bytes(), []byte("\n")))
		}
		if len(ks) > 0 {
			bw.WriteString("\n  ")
		}
		bw.WriteByte(']')
	}
	fmt.Fprintf(bw, "{\n  \"revision\": %d,\n", r.Rev)
	keys("changed", r.Puts)
	bw.WriteString(",\n")
	keys("deleted", r.Deletes)
	fmt.Fprintf(bw, ",\n  \"changed_count\": %d,\n  \"deleted_count\": %d", len(r.Puts), len(r.Deletes))
	if len(findings) > 0 {
		str.Reset()
		enc.SetIndent("  ", "  ")
		enc.Encode(findings)
		bw.WriteString(",\n  \"findings\": ")
		bw.Write(bytes.TrimSuffix(str.Bytes(), []byte("\n")))
	}
	bw.WriteString("\n}\n")
	bw.Flush()
}

// watchGuard refuses (409) a batch that applies or deletes a resource a
// watched directory defines, unless forced; it reports whether the batch
// may go ahead. The message names the files and says what to do.
func (a *api) watchGuard(w http.ResponseWriter, r *http.Request, b store.Batch) bool {
	if a.o.Owned == nil || r.URL.Query().Get("force") == "true" {
		return true
	}
	owned, err := a.o.Owned(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return false
	}
	if len(owned) == 0 {
		return true
	}
	type res struct{ typ, name string }
	files := map[res][]string{}
	for k, file := range owned {
		r := res{k.Type, k.Name}
		if !slices.Contains(files[r], file) {
			files[r] = append(files[r], file)
		}
	}
	var hits []string
	hit := func(typ, name string) {
		fs := files[res{typ, name}]
		if len(fs) == 0 {
			return
		}
		slices.Sort(fs)
		hits = append(hits, fmt.Sprintf("%s in %s", keyString(resource.Key{Type: typ, Name: name}), strings.Join(fs, ", ")))
		delete(files, res{typ, name}) // named once
	}
	for _, v := range b.Puts {
		k := v.Key()
		hit(k.Type, k.Name)
	}
	for _, d := range b.Deletes {
		hit(d.Type, d.Name)
	}
	if len(hits) == 0 {
		return true
	}
	what, fix := "applies", "change it there (the server applies the change), or apply with --force (the directory's next change replaces what you applied)"
	if len(b.Puts) == 0 {
		what, fix = "deletes", "remove it there (the server applies the change), or delete with --force and the directory and the store disagree"
	}
	more := ""
	if len(hits) > 10 {
		more = fmt.Sprintf(" and %d more", len(hits)-10)
		hits = hits[:10]
	}
	writeError(w, http.StatusConflict, fmt.Errorf("the server watches a directory that defines what this batch %s: %s%s. %s",
		what, strings.Join(hits, "; "), more, strings.ToUpper(fix[:1])+fix[1:]))
	return false
}

// guard refuses (409) a batch that would strand connected clients, on any
// replica, unless forced; it reports whether the batch may go ahead, and
// the warnings to answer it with: the replicas that did not answer, whose
// clients it could not check (a replica that died is listed until its
// lease ends: refusing would stop every apply meanwhile).
func (a *api) guard(w http.ResponseWriter, r *http.Request, b store.Batch) ([]DocError, bool) {
	failed, err := a.stranded(r, b)
	warn := unreachableNotes(failed, "the stranded-client guard did not check its clients")
	if err == nil {
		return warn, true
	}
	var se *StrandedError
	if !errors.As(err, &se) {
		writeError(w, http.StatusInternalServerError, err)
		return nil, false
	}
	if r.URL.Query().Get("force") == "true" {
		a.o.Logger.Warn("forced past the guard: clients left without a variant", "clients", len(se.Clients)+se.More)
		return warn, true
	}
	writeError(w, http.StatusConflict, err)
	return nil, false
}

// servedWait bounds how long an apply waits for its revision to be served;
// past it the apply still succeeds (it is stored), and the wait is logged.
const servedWait = 10 * time.Second

func (a *api) waitServed(ctx context.Context, rev int64) {
	if a.o.Served == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, servedWait)
	defer cancel()
	if err := a.o.Served(ctx, rev); err != nil {
		a.o.Logger.Warn("stored, but not yet served", "revision", rev, "error", err)
	}
}

func (a *api) delete(w http.ResponseWriter, r *http.Request) {
	if a.o.Store == nil {
		writeError(w, http.StatusNotFound, errors.New("this process has no store to delete from"))
		return
	}
	f, err := parseFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if f.typ == "" || f.name == "" {
		writeError(w, http.StatusBadRequest, errors.New("DELETE needs type and name (and constraints to delete one variant)"))
		return
	}
	d := store.Delete{Type: f.typ, Name: f.name, All: f.constraints == nil}
	if f.constraints != nil {
		d.Constraints = *f.constraints
	}
	at, ok := a.unstagedRev(w, r, "delete")
	if !ok {
		return
	}
	if !a.watchGuard(w, r, store.Batch{Deletes: []store.Delete{d}}) {
		return
	}
	batch := store.Batch{Deletes: []store.Delete{d}, Audit: a.audit(r, "delete")}
	warn, ok := a.guard(w, r, batch)
	if !ok {
		return
	}
	res, err := a.applyUnstaged(r.Context(), batch, at, "delete", a.o.Store.Apply)
	if err != nil {
		var se *StagedError
		if errors.As(err, &se) || errors.Is(err, store.ErrConflict) {
			writeError(w, http.StatusConflict, err)
			return
		}
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	if !res.Changed() {
		writeError(w, http.StatusNotFound, fmt.Errorf("no such resource: %s", keyString(resource.Key{Type: d.Type, Name: d.Name, Constraints: d.Constraints})))
		return
	}
	a.o.Logger.Info("deleted", "by", Who(r.Context()), "from", r.RemoteAddr, "revision", res.Rev, "variants", len(res.Deletes))
	a.waitServed(r.Context(), res.Rev)
	writeApplyResult(w, res, warn, listLimit(r))
}

func (a *api) clients(w http.ResponseWriter, r *http.Request) {
	if a.o.Clients == nil {
		writeJSON(w, http.StatusOK, []any{})
		return
	}
	all, failed, err := a.fleetClients(r)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	markIncomplete(w, failed)
	writeJSON(w, http.StatusOK, all)
}
