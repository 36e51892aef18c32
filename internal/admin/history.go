package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// History, diff and rollback read the store's history
// (store.Store.Revisions and StateAt); a rollback is a new batch that
// puts back the state of an earlier revision, so history is never
// rewritten and the rollback is itself a revision.

// DefaultHistoryLimit is how many revisions GET /v1/history lists when
// the request does not say.
const DefaultHistoryLimit = 50

func (a *api) audit(r *http.Request, via string) store.Audit {
	au := store.Audit{From: r.RemoteAddr, Via: via, Who: Who(r.Context())}
	if au.Who == "" && a.o.Identity != nil {
		au.Who = a.o.Identity(r)
	}
	return au
}

// historyFilter reads type and name; a name needs a type.
func historyFilter(r *http.Request) (store.Filter, error) {
	f, err := parseFilter(r)
	if err != nil {
		return store.Filter{}, err
	}
	if f.constraints != nil {
		return store.Filter{}, errors.New("history selects by type and name, not constraints")
	}
	if f.name != "" && f.typ == "" {
		return store.Filter{}, errors.New("a name needs a type")
	}
	return store.Filter{Type: f.typ, Name: f.name}, nil
}

func intParam(r *http.Request, key string, def int64) (int64, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a revision number (0 or more)", key, s)
	}
	return n, nil
}

// requiredRev reads a revision parameter that must be given; what says
// what it is for.
func requiredRev(r *http.Request, key, what string) (int64, error) {
	n, err := intParam(r, key, -1)
	if err == nil && n < 0 {
		err = fmt.Errorf("%s: missing (%s)", key, what)
	}
	return n, err
}

// storeOr writes the error of a process without a store.
func (a *api) storeOr(w http.ResponseWriter) bool {
	if a.o.Store == nil {
		writeError(w, http.StatusNotFound, errors.New("this process has no store, so no history"))
		return false
	}
	return true
}

// historyError answers a store history error with its status.
func historyError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrNoRevision):
		code = http.StatusNotFound
	case errors.Is(err, store.ErrCompacted):
		code = http.StatusGone
	case errors.Is(err, store.ErrConflict):
		code = http.StatusConflict
	}
	writeError(w, code, err)
}

// history answers GET /v1/history?type=&name=&limit=&before=.
func (a *api) history(w http.ResponseWriter, r *http.Request) {
	if !a.storeOr(w) {
		return
	}
	f, err := historyFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	limit, err := intParam(r, "limit", DefaultHistoryLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	before, err := intParam(r, "before", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	l, err := a.o.Store.Revisions(r.Context(), store.HistoryQuery{Filter: f, Limit: int(min(limit, 1<<20)), Before: before})
	if err != nil {
		historyError(w, err)
		return
	}
	if l.Revisions == nil {
		l.Revisions = []store.Revision{}
	}
	writeJSON(w, http.StatusOK, l)
}

// DiffEntry is one variant that differs between two revisions.
type DiffEntry struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Constraints string `json:"constraints,omitempty"`
	// Op is "added", "removed" or "changed", going from From to To.
	Op          string `json:"op"`
	FromVersion string `json:"from_version,omitempty"`
	ToVersion   string `json:"to_version,omitempty"`
	// Diff is a unified diff of the variant's YAML.
	Diff string `json:"diff"`
}

// Diff is the body of GET /v1/diff.
type Diff struct {
	From    int64       `json:"from"`
	To      int64       `json:"to"`
	Changes []DiffEntry `json:"changes"`
	// Staged, when a revision from From (excluded) to To is the staged
	// one, says so: what it changed reaches only its canary.
	Staged string `json:"staged,omitempty"`
}

// variantYAML renders a variant as its admin form in YAML, the text a
// diff compares.
func variantYAML(v *resource.Variant) string {
	if v == nil {
		return ""
	}
	js, err := json.Marshal(Render(v))
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	y, err := resource.JSONToYAML(js)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return string(y)
}

// DiffStates compares two states (each sorted by key, as StateAt returns
// them): every variant added, removed or changed, with a unified diff of
// its YAML. A variant whose content is equal in both is not listed, even
// when its version differs (it was changed and changed back).
func DiffStates(from, to []*resource.Variant, fromLabel, toLabel string) []DiffEntry {
	out := []DiffEntry{}
	i, j := 0, 0
	for i < len(from) || j < len(to) {
		var a, b *resource.Variant
		switch {
		case j == len(to) || i < len(from) && store.CompareKeys(from[i].Key(), to[j].Key()) < 0:
			a = from[i]
			i++
		case i == len(from) || store.CompareKeys(from[i].Key(), to[j].Key()) > 0:
			b = to[j]
			j++
		default:
			a, b = from[i], to[j]
			i, j = i+1, j+1
			if a.SameContent(b) {
				continue
			}
		}
		v, e := a, DiffEntry{Op: "changed"}
		switch {
		case a == nil:
			v, e.Op = b, "added"
		case b == nil:
			e.Op = "removed"
		}
		e.Type, e.Name, e.Constraints = v.Type.Name, v.Name, v.Constraints.String()
		if a != nil {
			e.FromVersion = a.Version
		}
		if b != nil {
			e.ToVersion = b.Version
		}
		e.Diff, _ = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(variantYAML(a)), B: difflib.SplitLines(variantYAML(b)),
			FromFile: fromLabel, ToFile: toLabel, Context: 3,
		})
		out = append(out, e)
	}
	return out
}

// diff answers GET /v1/diff?from=&to=&type=&name=.
func (a *api) diff(w http.ResponseWriter, r *http.Request) {
	if !a.storeOr(w) {
		return
	}
	f, err := historyFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	cur := a.o.Store.Rev()
	from, err := requiredRev(r, "from", "the revision to compare from")
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	to, err := intParam(r, "to", cur)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	sa, err := a.o.Store.StateAt(r.Context(), from, f)
	if err != nil {
		historyError(w, err)
		return
	}
	sb, err := a.o.Store.StateAt(r.Context(), to, f)
	if err != nil {
		historyError(w, err)
		return
	}
	d := Diff{From: from, To: to,
		Changes: DiffStates(sa, sb, "revision "+strconv.FormatInt(from, 10), "revision "+strconv.FormatInt(to, 10))}
	if rec, staged, _, err := a.stagedNow(r.Context()); err == nil && staged && rec.Rev > min(from, to) && rec.Rev <= max(from, to) {
		d.Staged = fmt.Sprintf("revision %d is staged for the canary %s: what it changed reaches only the canary's clients until `xdsd rollout promote %d`", rec.Rev, rec.Audit.Stage.Canary, rec.Rev)
	}
	writeJSON(w, http.StatusOK, d)
}

// RollbackResult is the body of POST /v1/rollback.
type RollbackResult struct {
	ApplyResult
	// To is the revision whose state was restored.
	To int64 `json:"to"`
}

// rollback answers POST /v1/rollback?rev=&type=&name=: a new revision
// whose state (of what the filter selects) is that of rev. It is
// computed at the current revision and applied only if the store is
// still there (store.Batch.IfRev), so a write that lands meanwhile is
// never overwritten unseen: the caller gets 409 and may try again.
func (a *api) rollback(w http.ResponseWriter, r *http.Request) {
	if !a.storeOr(w) {
		return
	}
	f, err := historyFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	rev, err := requiredRev(r, "rev", "the revision to restore")
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	// Computed at the revision at which no stage was seen, and applied
	// only there (IfRev below): a canary apply committed meanwhile
	// through another replica is never written over.
	cur, ok := a.unstagedRev(w, r, "rollback")
	if !ok {
		return
	}
	// if_rev: roll back only if the store is still at that revision (apply
	// --rollback-on-nack undoes its own revision, never a later one).
	ifRev, err := intParam(r, "if_rev", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if ifRev > 0 {
		if err := store.CheckIfRev(store.Batch{IfRev: ifRev}, cur); err != nil {
			historyError(w, err)
			return
		}
		cur = ifRev
	}
	old, err := a.o.Store.StateAt(r.Context(), rev, f)
	if err != nil {
		historyError(w, err)
		return
	}
	now, err := a.o.Store.StateAt(r.Context(), cur, f)
	if err != nil {
		historyError(w, err)
		return
	}
	b := store.StateBatch(old, now)
	b.IfRev = cur
	b.Audit = a.audit(r, fmt.Sprintf("rollback to %d", rev))
	res, err := a.o.Store.Apply(r.Context(), b)
	if err != nil {
		var be *store.BatchError
		if errors.As(err, &be) {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		historyError(w, err)
		return
	}
	a.o.Logger.Info("rolled back", "to", rev, "revision", res.Rev, "changed", len(res.Puts), "deleted", len(res.Deletes))
	a.waitServed(r.Context(), res.Rev)
	writeJSON(w, http.StatusOK, RollbackResult{ApplyResult: result(res), To: rev})
}

// maxRolloutWait bounds the wait of one GET /v1/rollout.
const maxRolloutWait = time.Hour

// rolloutPoll is how often a rollout being waited for is recomputed.
const rolloutPoll = 100 * time.Millisecond

// rollout answers GET /v1/rollout?rev=N[&wait=DURATION]: which connected
// clients revision N concerns and whether each has ACKed or NACKed it
// (internal/rollout). With wait, it answers once no concerned client is
// pending, or when the wait is over: xdsd apply --wait.
func (a *api) rollout(w http.ResponseWriter, r *http.Request) {
	if !a.storeOr(w) {
		return
	}
	if a.o.Rollout == nil {
		writeError(w, http.StatusNotFound, errors.New("this process does not follow rollouts"))
		return
	}
	rev, err := intParam(r, "rev", -1)
	if err == nil && rev <= 0 {
		err = errors.New("rev: missing (the revision whose rollout to follow)")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	var wait time.Duration
	if s := r.URL.Query().Get("wait"); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 || wait > maxRolloutWait {
			writeError(w, http.StatusBadRequest, fmt.Errorf("wait=%q: want a duration from 0 to %v", s, maxRolloutWait))
			return
		}
	}
	l, err := a.o.Store.Revisions(r.Context(), store.HistoryQuery{Before: rev + 1, Limit: 1})
	if err != nil {
		historyError(w, err)
		return
	}
	if len(l.Revisions) == 0 || l.Revisions[0].Rev != rev {
		historyError(w, store.CheckStateAt(rev, l.Rev, l.Oldest))
		return
	}
	changes := l.Revisions[0].Changes
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	tick := time.NewTicker(rolloutPoll)
	defer tick.Stop()
	report := func() (rollout.Report, bool) {
		rep := a.stagedRollout(r.Context(), a.fleetRollout(r, rev, changes))
		if rep.Stage != nil {
			return rep, stageDone(rep)
		}
		return rep, rep.Done
	}
	for {
		rep, done := report()
		if done {
			writeJSON(w, http.StatusOK, rep)
			return
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		rep, _ = report()
		writeJSON(w, http.StatusOK, rep)
		return
	}
}

// backup answers GET /v1/backup: a consistent copy of the store, written
// while it keeps serving (store.Backuper). The format is in the
// X-Xdsd-Backup-Format header; the revision the copy holds, known once it
// is written, in the X-Xdsd-Revision trailer.
func (a *api) backup(w http.ResponseWriter, r *http.Request) {
	if !a.storeOr(w) {
		return
	}
	backup := a.o.Export
	if b, ok := a.o.Store.(store.Backuper); ok {
		backup = b.Backup
	}
	if backup == nil {
		writeError(w, http.StatusNotImplemented, errors.New("this store cannot be backed up (mem: holds nothing durable; keep your resource files)"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Xdsd-Backup-Format", "bolt")
	w.Header().Set("Trailer", "X-Xdsd-Revision")
	cw := &countingWriter{w: w}
	rev, err := backup(r.Context(), cw)
	if err != nil {
		a.o.Logger.Error("backup failed", "error", err)
		if cw.n == 0 {
			// Nothing sent yet (a damaged store is found before the
			// copy starts): an error, not a 200 with a broken copy.
			w.Header().Del("Trailer")
			w.Header().Del("X-Xdsd-Backup-Format")
			writeError(w, http.StatusInternalServerError, fmt.Errorf("backup: %w", err))
		}
		// Otherwise the status is sent; the missing trailer tells the
		// client the copy is incomplete.
		return
	}
	w.Header().Set("X-Xdsd-Revision", strconv.FormatInt(rev, 10))
	a.o.Logger.Info("backup written", "revision", rev, "from", r.RemoteAddr)
}

// countingWriter counts what has been written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
