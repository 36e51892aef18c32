package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/canary"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
)

// Safe rollouts (docs/rollouts.md): apply --canary stages a revision,
// `xdsd rollout promote|abort REV` closes it, --bake has the server
// promote it, and --rollback-on-nack undoes a change a client NACKs.

// exitUndoRefused is apply --rollback-on-nack's exit status when the
// change was NACKed and undoing it was refused.
const exitUndoRefused = 5

// exitAborted is apply --canary --wait's exit status when a person
// aborted the staged revision (xdsd rollout abort) while the command
// waited and no canary client had NACKed it: the change is not in
// place, but no client refused it either (3 says that one did).
const exitAborted = 6

// canaryFlags are apply's safe-rollout flags.
type canaryFlags struct {
	spec           *string
	bake           *time.Duration
	rollbackOnNack *bool
}

func addCanaryFlags(fs *flag.FlagSet) canaryFlags {
	return canaryFlags{
		spec:           fs.String("canary", "", "stage the batch for the canary `SPEC`: only clients in it get it until xdsd rollout promote|abort REV; SPEC is N% (by a hash of the node id), param=value[,…] (TP2 parameters) or node=GLOB"),
		bake:           fs.Duration("bake", 0, "with --canary: the server promotes the staged revision once this long has passed, if a canary client ACKed it and none NACKed it"),
		rollbackOnNack: fs.Bool("rollback-on-nack", false, "with --wait: when a client the change concerns NACKs it, abort it (--canary, done by the server) or roll it back (done by this command); exit 3"),
	}
}

// check validates the flags against --wait and its timeout, and sets the
// apply's query.
func (c canaryFlags) check(q url.Values, wait bool, waitTimeout time.Duration) error {
	if *c.spec == "" {
		if *c.bake != 0 {
			return usagef("--bake goes with --canary: it says when the staged revision is promoted")
		}
	} else {
		spec, err := canary.Parse(*c.spec)
		if err != nil {
			return usagef("--canary: %v", err)
		}
		q.Set("canary", spec.String())
	}
	if *c.bake < 0 || *c.bake > admin.MaxBake {
		return usagef("--bake %v: want a duration from 1s to %v", *c.bake, admin.MaxBake)
	}
	if *c.bake > 0 {
		q.Set("bake", c.bake.String())
		if wait && waitTimeout <= *c.bake {
			return usagef("--wait-timeout %v is not longer than --bake %v: the wait would end before the server decides; give --wait-timeout %v or more (at most 1h), or leave out --wait and follow it with xdsd status",
				waitTimeout, *c.bake, *c.bake+time.Minute)
		}
	}
	if *c.rollbackOnNack {
		if !wait {
			return usagef("--rollback-on-nack acts on the NACKs --wait waits for: add --wait")
		}
		if *c.spec != "" {
			q.Set("abort_on_nack", "true")
		}
	}
	return nil
}

// waitStaged follows a staged revision until the server promotes or
// aborts it, the canary has answered (when nothing will close it by
// itself), or timeout passes; it prints the outcome.
func waitStaged(ac *adminClient, rev int64, timeout time.Duration, w io.Writer) error {
	rep, err := fetchRollout(ac, rev, timeout)
	if err != nil {
		return err
	}
	st := rep.Stage
	if st == nil {
		return fmt.Errorf("revision %d is not a staged revision", rev)
	}
	if st.State == store.StateStaged || st.ClosedBy == 0 || rep.Nacked > 0 {
		printRollout(w, rep, timeout)
	}
	switch st.State {
	case store.StatePromoted:
		fmt.Fprintf(w, "revision %d promoted by revision %d (%s): every client gets it\n", rev, st.ClosedBy, reasonOr(st))
		return nil
	case store.StateAborted:
		if !closedByServer(st) {
			return operatorAbort(w, rep, rev)
		}
		fmt.Fprintf(w, "revision %d aborted by revision %d (the server, on a canary NACK): the canary clients are back on the previous variants\n", rev, st.ClosedBy)
		if e, ok := nackOf(rep); ok {
			fmt.Fprintf(w, "NACK by %s (%s) of version %s: %s\n", e.Node, describeGroup(e), e.Version, e.Error)
		} else if st.Reason != "" {
			// (The canary has ACKed the abort since: the server's record
			// of why it aborted names the NACK.)
			fmt.Fprintln(w, st.Reason)
		}
		return exitError{exitNacked, fmt.Sprintf("revision %d was NACKed and aborted", rev)}
	case store.StateStaged:
	default:
		fmt.Fprintf(w, "revision %d is %s by revision %d (%s)\n", rev, st.State, st.ClosedBy, st.Via)
		return nil
	}
	switch {
	case rep.Nacked > 0 && st.AbortOnNack:
		return exitError{exitUndoRefused, fmt.Sprintf("a canary client NACKed revision %d and the server has not aborted it yet (see its log); run `xdsd rollout abort %d`", rev, rev)}
	case rep.Nacked > 0:
		return exitError{exitNacked, fmt.Sprintf("%s in the canary NACKed revision %d, which stays staged: run `xdsd rollout abort %d`", plural(rep.Nacked, "client"), rev, rev)}
	case st.Bake != "" && st.HeldOff != "":
		return exitError{exitTimeout, fmt.Sprintf("revision %d is still staged after %v: its bake is over, but the server holds off promoting it: %s", rev, timeout, st.HeldOff)}
	case st.Bake != "":
		return exitError{exitTimeout, fmt.Sprintf("revision %d is still staged after %v (its bake ends at %s): follow it with xdsd status", rev, timeout, st.BakeEnds.Local().Format(time.TimeOnly))}
	case len(rep.Unreachable) > 0:
		return exitError{exitTimeout, fmt.Sprintf("replica %s did not answer within %v: whether its canary clients took revision %d is unknown; it stays staged",
			rep.Unreachable[0].Replica, timeout, rev)}
	case !rep.Done:
		return exitError{exitTimeout, fmt.Sprintf("%d canary clients not answered after %v; revision %d stays staged", rep.Pending, timeout, rev)}
	}
	fmt.Fprintf(w, "revision %d stays staged: run `xdsd rollout promote %d` to serve it to every client, or `xdsd rollout abort %d`\n", rev, rev, rev)
	return nil
}

// closedByServer reports whether the server itself promoted or aborted a
// staged revision (on a NACK, or after its bake) rather than a person's
// xdsd rollout command: the server's revision carries why, and its audit
// says "server: rollout …".
func closedByServer(st *rollout.Stage) bool {
	return st.Reason != "" || strings.HasPrefix(st.Via, "server:")
}

// operatorAbort reports, for apply --canary --wait, a staged revision
// that a person aborted (xdsd rollout abort) while the command waited:
// which revision did it, whose command it was, and whether a canary
// client had NACKed it. A NACK still exits 3, as any NACK does; an abort
// that no NACK explains exits 6 (exitAborted), so that a script tells "the
// clients refused it" from "someone took it back".
func operatorAbort(w io.Writer, rep rollout.Report, rev int64) error {
	st := rep.Stage
	by := "`xdsd " + st.Via + "`"
	if st.Who != "" {
		by += " by " + st.Who
	}
	if st.From != "" {
		by += " from " + st.From
	}
	fmt.Fprintf(w, "revision %d aborted by revision %d (%s): the canary clients are back on the previous variants\n", rev, st.ClosedBy, by)
	if e, ok := nackOf(rep); ok {
		fmt.Fprintf(w, "NACK by %s (%s) of version %s: %s\n", e.Node, describeGroup(e), e.Version, e.Error)
		return exitError{exitNacked, fmt.Sprintf("revision %d was NACKed, and aborted by a person (revision %d, %s)", rev, st.ClosedBy, by)}
	}
	return exitError{exitAborted, fmt.Sprintf("revision %d was aborted by a person, not NACKed: revision %d (%s) took it back before it was promoted; see xdsd history", rev, st.ClosedBy, by)}
}

func reasonOr(st *rollout.Stage) string {
	if st.Reason != "" {
		return st.Reason
	}
	return st.Via
}

func nackOf(rep rollout.Report) (rollout.Entry, bool) {
	for _, e := range rep.Entries {
		if e.State == rollout.Nacked {
			return e, true
		}
	}
	return rollout.Entry{}, false
}

// describeGroup names an entry's group: its agent and parameters.
func describeGroup(e rollout.Entry) string {
	g := e.Agent
	if g == "" {
		g = "other"
	}
	if len(e.Params) > 0 {
		g += " with " + paramsText(e.Params)
	}
	return g
}

func paramsText(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ","
		}
		s += k + "=" + p[k]
	}
	return s
}

// rollbackOnNack undoes revision rev, which a client NACKed, by rolling
// back to the revision before it, only if the store is still at rev.
func rollbackOnNack(ac *adminClient, rev int64, nacked error, w io.Writer) error {
	q := url.Values{"rev": {strconv.FormatInt(rev-1, 10)}, "if_rev": {strconv.FormatInt(rev, 10)}}
	req, err := ac.request(http.MethodPost, "/v1/rollback?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var res admin.RollbackResult
	if err := ac.do(httpClient, req, &res); err != nil {
		return exitError{exitUndoRefused, fmt.Sprintf("%v; rolling revision %d back was refused: %v. Look at `xdsd history`, and run `xdsd rollback %d` if it is still what you want", nacked, rev, err, rev-1)}
	}
	fmt.Fprintf(w, "rolled back: revision %d restores the state of revision %d\n", res.Revision, res.To)
	return exitError{exitNacked, fmt.Sprintf("%v; rolled back by revision %d", nacked, res.Revision)}
}

func runRollout(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	pos, err := parse(fs, args, "rollout [--admin ADDR] promote|abort REV", stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "promote" && pos[0] != "abort") {
		return usagef("want promote REV or abort REV: the staged revision (see xdsd status or xdsd history)")
	}
	rev, err := revArg(pos[1], "REV")
	if err != nil {
		return err
	}
	req, err := ac.request(http.MethodPost, "/v1/rollout/"+pos[0]+"?rev="+strconv.FormatInt(rev, 10), nil)
	if err != nil {
		return err
	}
	var res admin.StageResult
	if err := ac.do(httpClient, req, &res); err != nil {
		return err
	}
	if res.State == store.StatePromoted {
		fmt.Fprintf(stdout, "promoted revision %d: every client it concerns gets it, as ", rev)
	} else {
		fmt.Fprintf(stdout, "aborted revision %d: its canary is back on the previous variants, as ", rev)
	}
	printResult(stdout, res.ApplyResult)
	return nil
}

// stageLine says, for history, what a revision's stage mark means: a
// staged revision's canary and where it stands (closed by a later
// revision of the list, or still staged when it is the store's latest),
// or which staged revision a promote or abort closed.
func stageLine(r store.Revision, l store.RevisionList) string {
	st := r.Audit.Stage
	if st == nil {
		return ""
	}
	if st.State != store.StateStaged {
		line := fmt.Sprintf("%s staged revision %d", st.State, st.Of)
		if st.Reason != "" {
			line += " by the server: " + st.Reason
		}
		return line
	}
	line := "staged for the canary " + st.Canary
	if st.Bake > 0 {
		line += fmt.Sprintf(", bake %v", time.Duration(st.Bake))
	}
	if st.AbortOnNack {
		line += ", aborted on a NACK"
	}
	for _, o := range l.Revisions {
		if o.Audit.Stage != nil && o.Audit.Stage.Of == r.Rev {
			return line + fmt.Sprintf(": %s by revision %d", o.Audit.Stage.State, o.Rev)
		}
	}
	if r.Rev == l.Rev {
		return line + fmt.Sprintf(": STAGED now (xdsd rollout promote|abort %d)", r.Rev)
	}
	return line
}

// printStaged prints, for status, the staged revision and its canary's
// answers, if a revision is staged.
func printStaged(ac *adminClient, w io.Writer) error {
	req, err := ac.request(http.MethodGet, "/v1/history?limit=1", nil)
	if err != nil {
		return err
	}
	var l store.RevisionList
	if err := ac.do(httpClient, req, &l); err != nil {
		return nil // (a relay has no history)
	}
	rec, staged, _ := store.StagedIn(l)
	if !staged {
		return nil
	}
	req, err = ac.request(http.MethodGet, "/v1/rollout?rev="+strconv.FormatInt(rec.Rev, 10), nil)
	if err != nil {
		return err
	}
	var rep rollout.Report
	if err := ac.do(httpClient, req, &rep); err != nil {
		return err
	}
	fmt.Fprintf(w, "STAGED revision %d for the canary %s", rec.Rev, rec.Audit.Stage.Canary)
	if st := rep.Stage; st != nil && st.BakeEnds != nil {
		fmt.Fprintf(w, " (bake ends %s)", st.BakeEnds.Local().Format(time.TimeOnly))
	}
	fmt.Fprintf(w, ": canary clients %d ACKed, %d NACKed, %d not answered; xdsd rollout promote|abort %d\n", rep.Acked, rep.Nacked, rep.Pending, rec.Rev)
	if st := rep.Stage; st != nil && st.HeldOff != "" {
		fmt.Fprintf(w, "  the bake is over, but the server holds off promoting it: %s\n", st.HeldOff)
	}
	fmt.Fprintln(w)
	return nil
}
