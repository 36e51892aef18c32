package origin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Staged revisions (docs/rollouts.md). Following the store, the server
// reads the record of each revision it loads: when it is staged, the db
// serves it with the variants it replaced kept for the streams outside
// its canary (db.Stage), in the same update as its changes, so no stream
// outside the canary is ever served it. While a revision is staged, the
// server also watches it (watchStage): with a bake, it promotes it once
// the bake is over if a canary stream ACKed it and none NACKed it; with
// abort-on-NACK, it aborts it as soon as a canary stream NACKs it. The
// mark and its start time are in the store, so a restarted server picks
// the watch up where it was; replicas sharing a store all watch, and
// each promote or abort applies only while the staged revision is still
// the latest (store.Batch.IfRev), so the first one wins and the others'
// are refused harmlessly.

// stagePoll is how often a staged revision's answers are looked at.
const stagePoll = 200 * time.Millisecond

// stageAt returns the stage the db serves at revision rev: nil unless
// rev's record marks it staged. It keeps the same *db.Stage while the
// staged revision stays the same.
func (s *Server) stageAt(ctx context.Context, rev int64) *db.Stage {
	if maybe, err := store.MaybeStaged(ctx, s.store, rev); err == nil && !maybe {
		s.setStaged(nil, store.Revision{})
		return nil
	}
	rec, ok, err := store.RecordAt(ctx, s.store, rev)
	if err != nil {
		s.log.Error("reading the record of a revision to tell whether it is staged", "revision", rev, "error", err)
	}
	if !ok || rec.Audit.Stage == nil || rec.Audit.Stage.State != store.StateStaged {
		s.setStaged(nil, store.Revision{})
		return nil
	}
	if cur := s.curStage; cur != nil && cur.Rev == rev {
		return cur
	}
	spec, err := canary.Parse(rec.Audit.Stage.Canary)
	if err != nil {
		// A mark this build cannot read: no stream is in its canary,
		// which keeps everyone on what they had.
		s.log.Error("staged revision with a canary this server cannot read: serving it to no one until promoted or aborted", "revision", rev, "error", err)
	}
	prev, err := store.PrevOf(ctx, s.store, rec)
	if err != nil {
		s.log.Error("staged revision whose previous variants cannot be read: streams outside the canary are served it too", "revision", rev, "error", err)
		prev = nil
	}
	st := &db.Stage{Rev: rev, Canary: spec, Prev: prev}
	s.setStaged(st, rec)
	s.log.Info("revision staged", "revision", rev, "canary", spec.String(), "bake", time.Duration(rec.Audit.Stage.Bake), "abort_on_nack", rec.Audit.Stage.AbortOnNack)
	return st
}

func (s *Server) setStaged(st *db.Stage, rec store.Revision) {
	s.curStage = st
	s.mu.Lock()
	s.stagedRec = rec
	s.mu.Unlock()
}

// StagedRevision returns the record of the staged revision the server
// serves, and false when none is.
func (s *Server) StagedRevision() (store.Revision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stagedRec, s.stagedRec.Rev > 0
}

// watchStage promotes or aborts the staged revision when its mark says
// the server is to, until ctx ends or following stops.
func (s *Server) watchStage(ctx context.Context) {
	for {
		s.mu.Lock()
		rec, ch, why := s.stagedRec, s.revCond, s.why
		s.mu.Unlock()
		if why != nil {
			return
		}
		var st *store.Stage
		if rec.Rev > 0 {
			st = rec.Audit.Stage
		}
		if st == nil || (st.Bake <= 0 && !st.AbortOnNack) {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		if done := s.judgeStage(ctx, rec); done {
			// Wait for the revision that closed it (or a refusal) to
			// come through the feed.
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
			continue
		}
		t := time.NewTimer(stagePoll)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// judgeStage looks at the staged revision rec's answers and promotes or
// aborts it when its mark says so; it reports whether it wrote.
func (s *Server) judgeStage(ctx context.Context, rec store.Revision) bool {
	st := rec.Audit.Stage
	rep := s.stageReport(rec)
	if rep.Nacked > 0 && st.AbortOnNack {
		e := firstNack(rep)
		why := fmt.Sprintf("NACK by %s (%s) of version %s: %s", e.Node, group(e), e.Version, e.Error)
		return s.closeStage(ctx, rec, store.StateAborted, why)
	}
	if st.Bake <= 0 || time.Now().Before(rec.Time.Add(time.Duration(st.Bake))) {
		return false
	}
	if rep.Nacked > 0 {
		// Not promoted: a NACK waits for a person (rollout abort).
		e := firstNack(rep)
		s.holdOff(rec.Rev, fmt.Sprintf("a canary client NACKed it: %s (%s) of version %s: %s; run xdsd rollout abort %d", e.Node, group(e), e.Version, e.Error, rec.Rev))
		return false
	}
	if s.fleetStage != nil {
		// The other replicas' canary clients count as much as this
		// one's: promoted only when every live replica answers and
		// none of their canary clients NACKed it.
		if time.Now().Before(s.fleetNext) {
			return false
		}
		frep, err := s.fleetStage(ctx, rec.Rev)
		if hold := fleetHold(frep, err); hold != "" {
			s.holdOff(rec.Rev, hold)
			s.fleetNext = time.Now().Add(fleetPoll)
			if s.heldRev != rec.Rev && ctx.Err() == nil {
				s.heldRev = rec.Rev
				s.log.Warn("staged revision's bake passed, but it is not promoted: "+hold, "revision", rec.Rev)
			}
			return false
		}
		rep = frep
	}
	if rep.Acked == 0 {
		// Not promoted: no ACK yet waits for one.
		s.holdOff(rec.Rev, "no canary client has ACKed it yet: promoted once one does")
		return false
	}
	s.holdOff(rec.Rev, "")
	return s.closeStage(ctx, rec, store.StatePromoted, fmt.Sprintf("bake of %v passed: %d canary streams ACKed, none NACKed", time.Duration(st.Bake), rep.Acked))
}

// holdOff records why the baked revision rev is not promoted
// (StageHold).
func (s *Server) holdOff(rev int64, why string) {
	s.mu.Lock()
	s.holdRev, s.holdWhy = rev, why
	s.mu.Unlock()
}

// StageHold says why the server holds off promoting the staged revision
// rev although its bake is over — a canary client NACKed it, a replica
// did not answer about its canary, or no canary client ACKed it yet —
// and "" when it does not (the bake is not over, or nothing holds it).
// The admin API reports it with the revision's rollout (GET
// /v1/rollout: stage.held_off), so that it is seen without the log.
func (s *Server) StageHold(rev int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holdRev != rev || s.stagedRec.Rev != rev {
		return ""
	}
	return s.holdWhy
}

// fleetPoll is how often the other replicas are asked again about a
// baked revision that one of them holds off.
const fleetPoll = time.Second

// SetFleetStage has the server ask f, before it promotes a baked
// revision, for the revision's rollout over every replica's canary
// clients (admin.FleetRollout): it promotes only when no replica is
// missing from the answer and none of their canary clients NACKed it.
// It is called before Start; without it, the server judges its own
// clients alone (a lone server).
func (s *Server) SetFleetStage(f func(ctx context.Context, rev int64) (rollout.Report, error)) {
	s.fleetStage = f
}

// fleetHold says why the fleet's answer rep (or err) holds a promote off,
// or "" when it does not.
func fleetHold(rep rollout.Report, err error) string {
	switch {
	case err != nil:
		return "the other replicas could not be asked about its canary: " + err.Error()
	case len(rep.Unreachable) > 0:
		u := rep.Unreachable[0]
		return fmt.Sprintf("replica %s did not answer about its canary clients (%s); promoted once it answers, or, if it died, once its registration's lease ends", u.Replica, u.Error)
	case rep.Nacked > 0:
		e := firstNack(rep)
		return fmt.Sprintf("a canary client on another replica NACKed it: %s (%s) of version %s: %s; run xdsd rollout abort %d", e.Node, group(e), e.Version, e.Error, rep.Revision)
	}
	return ""
}

// stageReport is the rollout of the staged revision over this server's
// streams in its canary (each replica judges its own streams).
func (s *Server) stageReport(rec store.Revision) rollout.Report {
	changes := rec.Changes
	clients := s.proto.Concerned(rollout.Names(changes))
	rep := rollout.Status(clients, rec.Rev, changes, func(typeURL, name string) []*resource.Variant {
		var vs []*resource.Variant
		s.db.Read(func(r *db.Reader) { vs = r.Variants(typeURL, name) })
		return vs
	})
	spec, err := canary.Parse(rec.Audit.Stage.Canary)
	if err != nil {
		return rollout.Report{Revision: rec.Rev}
	}
	return rollout.Canary(rep, spec)
}

func firstNack(rep rollout.Report) rollout.Entry {
	for _, e := range rep.Entries {
		if e.State == rollout.Nacked {
			return e
		}
	}
	return rollout.Entry{}
}

func group(e rollout.Entry) string {
	g := e.Agent
	if g == "" {
		g = "other"
	}
	for k, v := range e.Params {
		g += fmt.Sprintf(" %s=%s", k, v)
	}
	return g
}

// closeStage applies the promote or abort of rec; a refusal because the
// store moved on (another replica came first) is no failure.
func (s *Server) closeStage(ctx context.Context, rec store.Revision, state, why string) bool {
	a := store.Audit{Via: fmt.Sprintf("server: rollout %s %d", verb(state), rec.Rev), Who: "xdsd serve",
		Stage: &store.Stage{State: state, Of: rec.Rev, Canary: rec.Audit.Stage.Canary, Reason: why}}
	var b store.Batch
	var err error
	if state == store.StatePromoted {
		b, err = store.PromoteBatch(ctx, s.store, rec, a)
	} else {
		b, err = store.AbortBatch(ctx, s.store, rec, a)
	}
	if err == nil {
		var res store.Result
		res, err = s.store.Apply(ctx, b)
		if err == nil {
			s.log.Warn("staged revision "+state+" by the server", "revision", rec.Rev, "by", res.Rev, "why", why)
			return true
		}
	}
	if errors.Is(err, store.ErrConflict) {
		return true // another writer (a replica, a person) came first
	}
	if ctx.Err() == nil {
		s.log.Error("could not "+verb(state)+" the staged revision", "revision", rec.Rev, "why", why, "error", err)
	}
	return false
}

// verb is the rollout command of a state.
func verb(state string) string {
	if state == store.StatePromoted {
		return "promote"
	}
	return "abort"
}
