package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
)

// Staged revisions (docs/rollouts.md): POST /v1/apply?canary=SPEC
// [&bake=DURATION][&abort_on_nack=true] stages the batch's revision;
// POST /v1/rollout/promote?rev=N and /v1/rollout/abort?rev=N close it;
// while one is staged, every other write is refused with 409 (stage
// marks live in the store: store.Stage).

// MaxBake bounds a canary's bake time.
const MaxBake = 24 * time.Hour

// stageParams reads an apply's canary parameters: nil without canary=.
func stageParams(r *http.Request) (*store.Stage, error) {
	q := r.URL.Query()
	spec := q.Get("canary")
	if spec == "" {
		if q.Get("bake") != "" || q.Get("abort_on_nack") != "" {
			return nil, errors.New("bake and abort_on_nack go with canary=SPEC: they say when a staged revision is promoted or aborted")
		}
		return nil, nil
	}
	c, err := canary.Parse(spec)
	if err != nil {
		return nil, err
	}
	st := &store.Stage{State: store.StateStaged, Canary: c.String(), AbortOnNack: q.Get("abort_on_nack") == "true"}
	if s := q.Get("bake"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > MaxBake {
			return nil, fmt.Errorf("bake=%q: want a duration from 1s to %v (for example 5m)", s, MaxBake)
		}
		st.Bake = store.Duration(d)
	}
	return st, nil
}

// StagedError is the refusal of a write while a revision is staged.
type StagedError struct {
	Rev    int64
	Canary string
	What   string // what was refused: "apply", "delete", "rollback", "a canary apply"
}

func (e *StagedError) Error() string {
	return fmt.Sprintf("revision %d is staged for the canary %s: no %s until it is promoted or aborted. Run `xdsd rollout promote %d` to serve it to every client, or `xdsd rollout abort %d` to take it back, then try again",
		e.Rev, e.Canary, e.What, e.Rev, e.Rev)
}

// stagedNow returns the store's staged revision, and the store's
// revision at which that was read.
func (a *api) stagedNow(ctx context.Context) (rec store.Revision, staged bool, at int64, err error) {
	// A record never changes, so the answer for a revision is read once:
	// the latest record of a batch of 100,000 resources lists them all.
	cur := a.o.Store.Rev()
	a.stagedMu.Lock()
	c := a.stagedAt
	a.stagedMu.Unlock()
	if c != nil && c.at == cur {
		return c.rec, c.staged, c.at, nil
	}
	rec, staged, at, err = store.StagedAt(ctx, a.o.Store, cur)
	if err != nil {
		return store.Revision{}, false, 0, err
	}
	if !staged {
		rec.Changes = nil
	}
	a.stagedMu.Lock()
	a.stagedAt = &stagedCache{at: at, rec: rec, staged: staged}
	a.stagedMu.Unlock()
	return rec, staged, at, nil
}

// unstagedRev returns the store's revision when nothing is staged at it,
// which a write (what: "apply", "delete", …) then applies at (IfRev). When
// a revision is staged it answers 409 naming it and the rollout commands,
// on a failure 500, and reports false.
func (a *api) unstagedRev(w http.ResponseWriter, r *http.Request, what string) (int64, bool) {
	rec, staged, at, err := a.stagedNow(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return 0, false
	}
	if staged {
		writeError(w, http.StatusConflict, &StagedError{Rev: rec.Rev, Canary: rec.Audit.Stage.Canary, What: what})
		return 0, false
	}
	return at, true
}

// stagedCache is stagedNow's answer at one revision.
type stagedCache struct {
	at     int64
	rec    store.Revision
	staged bool
}

// StageResult answers a promote or abort.
type StageResult struct {
	ApplyResult
	// Of is the staged revision closed; State is promoted or aborted.
	Of    int64  `json:"of"`
	State string `json:"state"`
}

// closeStage answers POST /v1/rollout/promote and /v1/rollout/abort.
func (a *api) closeStage(state string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.storeOr(w) {
			return
		}
		verb := "promote"
		if state == store.StateAborted {
			verb = "abort"
		}
		rev, err := requiredRev(r, "rev", "the staged revision to "+verb)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		rec, staged, _, err := a.stagedNow(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		if !staged || rec.Rev != rev {
			msg := fmt.Sprintf("revision %d is not staged", rev)
			if st, _ := a.stageState(r.Context(), rev); st != nil && st.ClosedBy > 0 {
				msg = fmt.Sprintf("revision %d is %s already (by revision %d, %s)", rev, st.State, st.ClosedBy, st.Via)
			}
			if staged {
				msg += fmt.Sprintf("; revision %d is", rec.Rev)
			} else {
				msg += "; no revision is staged (see xdsd history)"
			}
			writeError(w, http.StatusConflict, errors.New(msg))
			return
		}
		au := a.audit(r, fmt.Sprintf("rollout %s %d", verb, rev))
		au.Stage = &store.Stage{State: state, Of: rev, Canary: rec.Audit.Stage.Canary}
		var b store.Batch
		if state == store.StatePromoted {
			b, err = store.PromoteBatch(r.Context(), a.o.Store, rec, au)
		} else {
			b, err = store.AbortBatch(r.Context(), a.o.Store, rec, au)
		}
		if err != nil {
			historyError(w, err)
			return
		}
		res, err := a.o.Store.Apply(r.Context(), b)
		if err != nil {
			historyError(w, err)
			return
		}
		a.o.Logger.Info("staged revision "+state, "revision", rev, "by", res.Rev, "who", au.Who)
		a.waitServed(r.Context(), res.Rev)
		writeJSON(w, http.StatusOK, StageResult{ApplyResult: result(res), Of: rev, State: state})
	}
}

// stageState is where revision rev stands as a staged revision: nil when
// it was not applied with a canary.
func (a *api) stageState(ctx context.Context, rev int64) (*rollout.Stage, error) {
	rec, ok, err := store.RecordAt(ctx, a.o.Store, rev)
	if err != nil || !ok || rec.Audit.Stage == nil || rec.Audit.Stage.State != store.StateStaged {
		return nil, err
	}
	m := rec.Audit.Stage
	st := &rollout.Stage{State: store.StateStaged, Canary: m.Canary, AbortOnNack: m.AbortOnNack}
	if m.Bake > 0 {
		st.Bake = time.Duration(m.Bake).String()
		ends := rec.Time.Add(time.Duration(m.Bake))
		st.BakeEnds = &ends
	}
	next, ok, err := store.RecordAt(ctx, a.o.Store, rev+1)
	if err != nil || !ok {
		return st, err
	}
	st.ClosedBy, st.Via, st.Who, st.From = next.Rev, next.Audit.Via, next.Audit.Who, next.Audit.From
	if ns := next.Audit.Stage; ns != nil && ns.Of == rev {
		st.State, st.Reason = ns.State, ns.Reason
	} else {
		// Another write landed on top of it (one that raced the stage
		// across replicas): it is served to everyone now.
		st.State = "superseded"
	}
	return st, nil
}

// stageDone reports whether a wait on a staged revision's rollout is
// over: it is closed; or nothing will close it by itself and the canary
// has answered; or a canary stream NACKed and the server will not abort.
func stageDone(rep rollout.Report) bool {
	st := rep.Stage
	switch {
	case st.State != store.StateStaged:
		return true
	case rep.Nacked > 0:
		return !st.AbortOnNack
	case st.Bake == "":
		return rep.Done
	}
	return false
}

// stagedRollout narrows a rollout report of a staged revision to its
// canary and adds where the revision stands; reports of other revisions
// are returned as they are.
func (a *api) stagedRollout(ctx context.Context, rep rollout.Report) rollout.Report {
	st, err := a.stageState(ctx, rep.Revision)
	if err != nil || st == nil {
		return rep
	}
	if spec, err := canary.Parse(st.Canary); err == nil {
		rep = rollout.Canary(rep, spec)
	}
	if st.State == store.StateStaged && a.o.StageHold != nil {
		st.HeldOff = a.o.StageHold(rep.Revision)
	}
	rep.Stage = st
	return rep
}

// unstagedTries bounds how often a plain write whose revision moved on
// is checked again and retried before it is answered 409.
const unstagedTries = 3

// applyUnstaged applies a plain write (apply, delete) that found no
// staged revision at revision at, only while the store is still there
// (store.Batch.IfRev), so that a canary apply committed meanwhile through
// another replica is never written over: the check and the write are
// one. When the store moved on, it reads the latest record again and,
// when nothing is staged, retries at the new revision (so that plain
// writes racing each other still succeed), up to unstagedTries times; a
// staged revision that appeared is answered as a *StagedError. A batch
// whose caller gave an IfRev is applied once, as it is. apply is the
// first try's Apply (a prewrite's); retries use the store's.
func (a *api) applyUnstaged(ctx context.Context, b store.Batch, at int64, what string, apply func(context.Context, store.Batch) (store.Result, error)) (store.Result, error) {
	if b.IfRev > 0 || at <= 0 {
		return apply(ctx, b)
	}
	for try := 1; ; try++ {
		b.IfRev = at
		res, err := apply(ctx, b)
		if err == nil || !errors.Is(err, store.ErrConflict) || try == unstagedTries {
			return res, err
		}
		apply = a.o.Store.Apply
		rec, staged, next, serr := store.StagedLatest(ctx, a.o.Store)
		if serr != nil {
			return store.Result{}, serr
		}
		if staged {
			return store.Result{}, &StagedError{Rev: rec.Rev, Canary: rec.Audit.Stage.Canary, What: what}
		}
		at = next
	}
}
