package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/xdsd/xdsd/internal/rollout"
)

// Exit codes of apply --wait beyond 0 (every concerned client ACKed):
// 3 when a client NACKed; 4 when the rollout is not known to be done
// within --wait-timeout: a client has not answered, or a registered
// replica did not answer (whether its clients took the change is
// unknown). 5 and 6 are apply --canary's and --rollback-on-nack's
// (canary.go).
const (
	exitNacked  = 3
	exitTimeout = 4
)

// exitError ends a command with a given exit code, its message already
// printed (or none needed).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// fetchRollout asks the server for revision rev's rollout, letting it
// wait up to timeout for every concerned client to answer (or, for a
// staged revision, for it to be promoted or aborted).
func fetchRollout(ac *adminClient, rev int64, timeout time.Duration) (rollout.Report, error) {
	q := url.Values{"rev": {strconv.FormatInt(rev, 10)}, "wait": {timeout.String()}}
	var rep rollout.Report
	req, err := ac.request(http.MethodGet, "/v1/rollout?"+q.Encode(), nil)
	if err != nil {
		return rep, err
	}
	err = ac.do(&http.Client{Timeout: timeout + 30*time.Second}, req, &rep)
	return rep, err
}

// waitRollout follows revision rev's rollout until every client it
// concerns has answered or timeout passes, and prints a summary.
func waitRollout(ac *adminClient, rev int64, timeout time.Duration, w io.Writer) error {
	rep, err := fetchRollout(ac, rev, timeout)
	if err != nil {
		return err
	}
	printRollout(w, rep, timeout)
	switch {
	case rep.Nacked > 0:
		return exitError{exitNacked, fmt.Sprintf("%s NACKed revision %d", plural(rep.Nacked, "client"), rev)}
	case len(rep.Unreachable) > 0:
		names := make([]string, len(rep.Unreachable))
		for i, u := range rep.Unreachable {
			names[i] = u.Replica
		}
		return exitError{exitTimeout, fmt.Sprintf("replica %s did not answer within %v: whether the clients there took revision %d is unknown",
			strings.Join(names, ", "), timeout, rev)}
	case !rep.Done:
		return exitError{exitTimeout, fmt.Sprintf("%d not answered after %v", rep.Pending, timeout)}
	}
	return nil
}

// printRollout prints a rollout summary: counts, then the NACKs with
// their reasons, then the clients that did not answer.
func printRollout(w io.Writer, rep rollout.Report, timeout time.Duration) {
	total := rep.Acked + rep.Nacked + rep.Pending + rep.Unserved
	defer func() {
		for _, u := range rep.Unreachable {
			fmt.Fprintf(w, "  UNREACHABLE replica %s: %s (its clients' answers are unknown)\n", u.Replica, u.Error)
		}
	}()
	if total == 0 {
		what := "no connected client subscribes to what changed"
		if len(rep.Unreachable) > 0 {
			what = "no client of the replicas that answered subscribes to what changed"
		}
		fmt.Fprintf(w, "rollout of revision %d: %s\n", rep.Revision, what)
		return
	}
	fmt.Fprintf(w, "rollout of revision %d: %d ACKed, %d NACKed, %d not answered", rep.Revision, rep.Acked, rep.Nacked, rep.Pending)
	if rep.Pending > 0 {
		fmt.Fprintf(w, " after %v", timeout)
	}
	if rep.Unserved > 0 {
		fmt.Fprintf(w, ", %d left without a variant (SotW: sent nothing, keeps its copy)", rep.Unserved)
	}
	fmt.Fprintln(w)
	es := append([]rollout.Entry(nil), rep.Entries...)
	sort.SliceStable(es, func(i, j int) bool { return es[i].Node < es[j].Node })
	for _, e := range es {
		if len(e.NoVariant) > 0 {
			fmt.Fprintf(w, "  NO VARIANT %s %s (%s) %s: nothing matches its parameters now (told it does not exist)\n", short(e.Type), e.Node, e.Address, strings.Join(e.NoVariant, ", "))
		}
	}
	for _, state := range []string{rollout.Nacked, rollout.Pending} {
		for _, e := range es {
			if e.State != state {
				continue
			}
			node := e.Node
			if node == "" {
				node = "(no node id)"
			}
			where := e.Address
			if e.Replica != "" {
				where += " on replica " + e.Replica
			}
			fmt.Fprintf(w, "  %-8s %s %s (%s) %s", strings.ToUpper(e.State), short(e.Type), node, where, strings.Join(e.Changed, ", "))
			if e.State == rollout.Nacked {
				fmt.Fprintf(w, ": version %s: %s", e.Version, e.Error)
			}
			fmt.Fprintln(w)
		}
	}
}
