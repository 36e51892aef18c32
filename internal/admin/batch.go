package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/internal/docprep"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/refs"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// An apply's body is read as a stream: its documents are decoded as they
// arrive and only what the store needs of each (its variant) is kept, so
// the server holds about half the size of the body however large the
// batch. The body is one source (YAML or JSON, named by the source
// parameter), or multipart/form-data with one source per part, named by
// the part's form name: `xdsd apply -f DIR` sends each file of DIR as a
// part, so errors name the user's files and lines.

// batch is an apply being read.
type batch struct {
	batch    store.Batch
	set      resource.SetCheck
	errs     resource.ErrorList
	check    *clientcheck.Checker // nil without client checks
	findings []clientcheck.Finding
	// notes are warnings about the checks themselves: replicas whose
	// clients they could not check for.
	notes []DocError
	// dryRun keeps, for a dry run, the checker once its findings are
	// out, what it refuses, and the store's variants before the batch.
	dryRun  bool
	checked *clientcheck.Checker
	refusal error
	before  *refs.Set
	// The checks' work on each document alone, done where it was
	// decoded, until add takes it.
	mu       sync.Mutex
	prepared map[*resource.Document]*clientcheck.Prepared
	// prewrite, when the store can, writes the batch's payloads while the
	// rest of it is read (store.Prewriter); nil otherwise.
	prewrite store.Prewrite
}

// preparing is a source whose documents the client checks prepare as
// they are decoded (resource.DecodeReader calls Prepare).
type preparing struct {
	io.Reader
	b *batch
}

var _ docprep.Reader[*resource.Document] = preparing{}

// Prepare does the checks' work on d alone, with the Any values its
// validation decoded.
func (p preparing) Prepare(d *resource.Document, anys *docprep.Anys) {
	pd := p.b.check.Prepare(d, anys)
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.prepared[d] = pd
}

func (b *batch) add(d *resource.Document) error {
	b.batch.Puts = append(b.batch.Puts, d.Variant)
	if b.prewrite != nil {
		b.prewrite.Add(d.Variant)
	}
	b.set.Add(d)
	if b.check != nil {
		b.mu.Lock()
		p := b.prepared[d]
		delete(b.prepared, d)
		b.mu.Unlock()
		b.check.AddPrepared(d, p)
	}
	return nil
}

// rejected is an apply refused for what a client would reject.
type rejected struct {
	findings []clientcheck.Finding
	errors   int
	who      string // whom the checks were for: "Envoy", "the connected or declared clients"
}

func (r *rejected) Error() string {
	return fmt.Sprintf("%d problem(s) %s would reject or wait for in vain; nothing was applied (force=true, xdsd apply --force, applies it anyway)", r.errors, r.who)
}

// read decodes one source into the batch, collecting its problems.
func (b *batch) read(source string, r io.Reader, f resource.Format) error {
	if b.check != nil {
		if b.prepared == nil {
			b.prepared = map[*resource.Document]*clientcheck.Prepared{}
		}
		r = preparing{Reader: r, b: b}
	}
	err := resource.DecodeReader(source, r, f, b.add)
	var l resource.ErrorList
	if errors.As(err, &l) {
		b.errs = append(b.errs, l...)
		return nil
	}
	return err
}

// readBatch reads the documents of an apply's body into b. On failure
// it returns the status to answer with.
func (a *api) readBatch(w http.ResponseWriter, r *http.Request, b *batch) (int, error) {
	limit := a.o.MaxBatchBytes
	if limit <= 0 {
		limit = DefaultMaxBatchBytes
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	q := r.URL.Query()
	if c := q.Get("client"); c != "" && c != "none" {
		client, err := clientcheck.ParseRuleSet(c)
		if err != nil {
			return http.StatusBadRequest, fmt.Errorf("client=%s: %w", c, err)
		}
		declared, err := ParseFleet(q.Get("fleet"))
		if err != nil {
			return http.StatusBadRequest, err
		}
		connected, failed, err := a.connectedGroups(r)
		if err != nil {
			return http.StatusBadGateway, fmt.Errorf("reading the connected clients for the checks: %w; nothing was applied", err)
		}
		b.notes = append(b.notes, unreachableNotes(failed, "the client checks did not check for its clients")...)
		b.check = clientcheck.NewFleet(client, append(connected, declared...))
		phasesOf(r.Context()).mark("groups")
	} else if q.Get("fleet") != "" {
		return http.StatusBadRequest, errors.New("fleet= declares clients for the client checks, which client=none (or no client=) turns off")
	}
	err := readSources(r, a.o.Memory.Reader(body), b.read)
	phasesOf(r.Context()).mark("decode")
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("the batch is larger than %d bytes, the server's limit: raise it with xdsd serve --max-batch-bytes; nothing was applied", limit)
	case err != nil:
		return http.StatusBadRequest, fmt.Errorf("reading the batch: %w; nothing was applied", err)
	}
	b.errs = append(b.errs, b.set.Errs()...)
	b.set = resource.SetCheck{} // its index of the batch is not needed any more
	if len(b.errs) > 0 {
		return http.StatusBadRequest, b.errs
	}
	if b.check != nil && len(b.batch.Puts) == 0 {
		b.check = nil // nothing to check (a client asking whether client=auto is known)
	}
	if b.check != nil {
		defer phasesOf(r.Context()).mark("checks")
		if b.dryRun {
			b.checked, b.before = b.check, &refs.Set{}
		}
		who := b.check.Describe()
		if b.check.RuleSet() == clientcheck.Auto && b.check.Groups() == nil {
			who += " (no client is connected or declared: Envoy's rules refuse, gRPC's warn; client=grpc, xdsd apply --client grpc, checks for gRPC, fleet=, xdsd apply --fleet FILE, declares the clients)"
		}
		err := a.stored().check(r.Context(), a.o.Store, a.o.Logger, func(x *clientcheck.Index) {
			if b.dryRun {
				// The plan needs the whole of both; the checker then
				// holds its own, and is judged without the lock.
				x.AddTo(b.check, b.before)
				return
			}
			b.check.On(x)
			b.findings = b.check.Findings()
		})
		if err != nil {
			return http.StatusInternalServerError, err
		}
		if b.dryRun {
			b.findings = b.check.Findings()
		}
		b.check = nil
		errs := 0
		for _, f := range b.findings {
			if f.Severity == clientcheck.Error {
				errs++
			}
		}
		if errs > 0 && q.Get("force") != "true" {
			err := &rejected{findings: b.findings, errors: errs, who: who}
			if b.dryRun {
				b.refusal = err
				return 0, nil
			}
			return http.StatusBadRequest, err
		}
	}
	return 0, nil
}

// connectedGroups are the connected clients by agent and parameter set,
// fleet-wide (every live replica's), for the client checks; none when
// the process has no fleet to ask. It returns the replicas that did not
// answer too.
func (a *api) connectedGroups(r *http.Request) ([]clientcheck.Group, []fleet.Unreachable, error) {
	if a.o.Groups == nil {
		return nil, nil, nil
	}
	gs, failed, err := a.fleetGroups(r)
	if err != nil {
		return nil, nil, err
	}
	out := make([]clientcheck.Group, len(gs))
	for i, g := range gs {
		out[i] = clientcheck.Group{Agent: g.Agent, Params: g.Params, Count: g.Count, Samples: g.Nodes}
	}
	return out, failed, nil
}

// unreachableNotes are the warnings an apply answers with for replicas
// that did not answer one of its questions; what says what was missed.
func unreachableNotes(un []fleet.Unreachable, what string) []DocError {
	out := make([]DocError, len(un))
	for i, u := range un {
		out[i] = DocError{Resource: "replica " + u.Replica, Rule: "fleet/unreachable-replica", Warning: true,
			Message: fmt.Sprintf("did not answer (%s): %s", u.Error, what)}
	}
	return out
}

// MaxDeclaredGroups bounds the groups a fleet= declaration may hold.
const MaxDeclaredGroups = 10_000

// ParseFleet reads the fleet= parameter of an apply: the clients an
// operator declares (xdsd apply --fleet), as a JSON list of
// {"agent": "envoy", "params": {"env": "prod"}}. "" declares none.
func ParseFleet(s string) ([]clientcheck.Group, error) {
	if s == "" {
		return nil, nil
	}
	var decl []struct {
		Agent  string            `json:"agent"`
		Params map[string]string `json:"params"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&decl); err != nil {
		return nil, fmt.Errorf(`fleet=: %v: want a JSON list such as [{"agent": "envoy", "params": {"env": "prod"}}, {"agent": "grpc"}]`, err)
	}
	if len(decl) > MaxDeclaredGroups {
		return nil, fmt.Errorf("fleet=: %d groups, more than %d", len(decl), MaxDeclaredGroups)
	}
	out := make([]clientcheck.Group, len(decl))
	for i, d := range decl {
		if d.Agent == "" {
			return nil, fmt.Errorf(`fleet=: entry %d has no agent: want one such as "envoy", "grpc" or "grpc-java"`, i)
		}
		out[i] = clientcheck.Group{Agent: d.Agent, Params: d.Params, Declared: true}
	}
	return out, nil
}

// storedSummaries keeps, between applies, what the client checks need of
// each stored variant (a clientcheck.Index), brought up to date from the
// store's changes — those of every replica, through the store's change
// feed — so that an apply decodes only what changed since the last, and
// its checks look only near the batch: an apply of one cluster with a
// million stored took 115 s when every stored variant was added to each
// apply's checker.
type storedSummaries struct {
	mu    sync.Mutex
	rev   int64
	valid bool
	index *clientcheck.Index

	// While an update runs (a start's build, CheckIndex.Build), how many
	// variants it has to add and how many it has added: an apply waiting
	// for it says so in the log.
	updating    atomic.Bool
	done, total atomic.Int64
}

// CheckIndex is what the client checks of the applies keep of the
// stored variants between applies. Built at a server's start, in the
// background (Build), it spares the first apply the build: 100-130 s
// with a million stored.
type CheckIndex struct{ s storedSummaries }

// NewCheckIndex returns an index not yet built: the first apply builds
// it, or waits for a Build under way.
func NewCheckIndex() *CheckIndex { return &CheckIndex{} }

// Build brings the index up to date with the store, logging when it
// starts and ends. An apply that comes meanwhile waits for it (and says
// so in the log) rather than build another. Cancelled, it leaves the
// index to the next apply.
func (x *CheckIndex) Build(ctx context.Context, st store.Store, log *slog.Logger) error {
	start := time.Now()
	log.Info("building the client checks' index of the stored variants (an apply meanwhile waits for it)")
	err := x.s.check(ctx, st, log, func(ix *clientcheck.Index) {
		log.Info("built the client checks' index of the stored variants", "variants", ix.Len(),
			"took", time.Since(start).Round(time.Millisecond))
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("building the client checks' index failed: the first apply builds it", "error", err)
	}
	return err
}

// progressEvery is how often (in variants) an update looks at its
// context and counts what it has added.
const progressEvery = 4096

// check brings the index up to date with the store and calls fn with it,
// under the lock that keeps it from changing until fn returns. Waiting
// for an update under way (a start's build), it logs how far that is.
func (s *storedSummaries) check(ctx context.Context, st store.Store, log *slog.Logger, fn func(*clientcheck.Index)) error {
	if !s.mu.TryLock() {
		if s.updating.Load() && log != nil {
			if total := s.total.Load(); total == 0 {
				log.Info("an apply waits for the client checks' index of the stored variants: reading them")
			} else {
				log.Info("an apply waits for the client checks' index of the stored variants, being built",
					"added", s.done.Load(), "of", total)
			}
			start := time.Now()
			s.mu.Lock()
			log.Info("the apply waited for the client checks' index", "took", time.Since(start).Round(time.Millisecond))
		} else {
			s.mu.Lock()
		}
	}
	defer s.mu.Unlock()
	since := int64(store.FromStart)
	if s.valid {
		since = s.rev
	}
	s.updating.Store(true)
	defer s.updating.Store(false)
	s.done.Store(0)
	s.total.Store(0)
	cs, err := st.Changes(ctx, since)
	if err != nil {
		return err
	}
	if cs.Reset || s.index == nil {
		s.index = clientcheck.NewIndex()
	}
	s.valid = false // until every change is in
	s.total.Store(int64(len(cs.Puts) + len(cs.Deletes)))
	for i, v := range cs.Puts {
		if i%progressEvery == progressEvery-1 {
			s.done.Store(int64(i + 1))
			if err := ctx.Err(); err != nil {
				s.index = nil // half built: the next check starts again
				return err
			}
		}
		m, err := clientcheck.IndexMessage(v)
		if err != nil {
			s.index.Delete(v.Key())
			continue // a payload this binary cannot read is not checked
		}
		s.index.Put(v, m)
	}
	for _, key := range cs.Deletes {
		s.index.Delete(key)
	}
	s.rev, s.valid = cs.Rev, true
	fn(s.index)
	return nil
}

// readSources calls read with each source of the body: its parts when it
// is multipart/form-data, else the body itself.
func readSources(r *http.Request, body io.Reader, read func(source string, r io.Reader, f resource.Format) error) error {
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		source := r.URL.Query().Get("source")
		if source == "" {
			source = "request"
		}
		f := resource.Auto
		if mt == "application/json" {
			f = resource.JSON // strict: not read as YAML
		}
		return read(source, body, f)
	}
	mr := multipart.NewReader(body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		source := p.FormName()
		if source == "" {
			source = "request"
		}
		f := resource.FormatOf(source)
		if pt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); pt == "application/json" {
			f = resource.JSON
		}
		err = read(source, p, f)
		p.Close()
		if err != nil {
			return err
		}
	}
}
