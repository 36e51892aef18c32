package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// FastFail is how long get gives a server that fails every connection
// before reporting it, rather than waiting for the timeout.
const FastFail = 1500 * time.Millisecond

// How a glob's or the wildcard's answer is taken as complete: members come
// in one response, so once the first has come and nothing more for
// settleQuiet, checked every settleTick.
const (
	settleTick  = 50 * time.Millisecond
	settleQuiet = 200 * time.Millisecond
	// checkTick is how often get checks whether every unanswered name's
	// server is failing.
	checkTick = 100 * time.Millisecond
)

// Answer is what Get found.
type Answer struct {
	// Results are the names' latest states, in the order asked, each name
	// once; the names whose server was not reached are left out.
	Results []Result
	// Unreachable says why names could not be had: their server was not
	// reached.
	Unreachable []string
	// Unanswered are the names a reached server said nothing of.
	Unanswered []string
	// Failed: some name could not be had (does not exist, rejected, not
	// answered).
	Failed bool

	timeout time.Duration
}

// Err is why not every name could be had, or nil: the unreachable
// servers first, then the unanswered names, then the rest.
func (a *Answer) Err() error {
	switch {
	case len(a.Unreachable) > 0:
		return errors.New(strings.Join(a.Unreachable, "; "))
	case len(a.Unanswered) > 0:
		return fmt.Errorf("no answer within --timeout %v for %s", a.timeout, strings.Join(a.Unanswered, ", "))
	case a.Failed:
		return errors.New("not every resource could be had")
	}
	return nil
}

// Get asks c for each name once and returns each in its latest state once
// every name has been answered, or timeout has passed — or sooner, when
// the server of every name still waiting has been failing for FastFail.
// c should have no does-not-exist timer: a name not answered by then is
// reported as unanswered, not as absent, which only the server's word
// makes it. hint explains an unreachable server (NotReached). Its error is
// a *NameError for a name c refuses.
func Get(c *client.Client, computed map[string]string, typ *resource.Type, names []string, timeout time.Duration, hint func(server string) string) (*Answer, error) {
	g := &getter{c: c, typ: typ, names: names, timeout: timeout, hint: hint,
		states: map[string]*nameState{}, done: map[string]bool{}, all: make(chan struct{}), stop: make(chan struct{}), last: time.Now()}
	defer g.settling.Wait()
	defer close(g.stop)
	for _, n := range names {
		if g.states[n] == nil {
			g.states[n] = &nameState{}
		}
	}
	for _, n := range names {
		cancel, err := g.watch(computed, n)
		if err != nil {
			return nil, err
		}
		defer cancel()
	}
	skip := g.wait()
	return g.answer(skip), nil
}

// getter is one Get: the latest word on each name, and which are done.
type getter struct {
	c       *client.Client
	typ     *resource.Type
	names   []string
	timeout time.Duration
	hint    func(server string) string

	mu     sync.Mutex
	states map[string]*nameState
	done   map[string]bool
	frozen bool // every name is done: later events change nothing reported
	last   time.Time
	// unreachable says why names could not be had: their server was not
	// reached.
	unreachable []string

	all      chan struct{} // closed once every name is done
	stop     chan struct{} // closed when Get returns
	settling sync.WaitGroup
}

// finished closes all once every name is done; mu is held.
func (g *getter) finished() {
	for _, n := range g.names {
		if !g.done[n] {
			return
		}
	}
	g.frozen = true
	select {
	case <-g.all:
	default:
		close(g.all)
	}
}

// watch watches n, noting each event as the latest word on it.
func (g *getter) watch(computed map[string]string, n string) (client.CancelFunc, error) {
	multi := n == db.Wildcard || db.IsGlob(n)
	st := g.states[n]
	cancel, err := watchName(context.Background(), g.c, computed, g.typ.URL, n, func(e client.Event) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.frozen {
			return
		}
		st.note(e, g.typ, multi)
		if !multi {
			g.done[n] = true
		}
		g.last = time.Now()
		g.finished()
	})
	if err != nil {
		return nil, err
	}
	if multi {
		// A glob or a wildcard has no end; take what the first answer
		// brings.
		g.settling.Add(1)
		go g.settle(n, st)
	}
	return cancel, nil
}

// settle marks a glob or the wildcard done once its first answer has
// come and nothing more for a while, or at the timeout.
func (g *getter) settle(n string, st *nameState) {
	defer g.settling.Done()
	t := time.NewTicker(settleTick)
	defer t.Stop()
	deadline := time.Now().Add(g.timeout)
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		g.mu.Lock()
		settled := st.heard && time.Since(g.last) > settleQuiet
		if settled || time.Now().After(deadline) {
			g.done[n] = true
			g.finished()
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
	}
}

// wait waits until every name is done, the timeout passes, or every name
// not done has a failing server; then the names whose server was not
// reached are done, and skipped (returned, and why in g.unreachable), and
// the rest are unanswered.
func (g *getter) wait() (skip map[string]bool) {
	skip = map[string]bool{}
	deadline := time.NewTimer(g.timeout)
	defer deadline.Stop()
	// A server that refuses connections, or cannot be reached at all, is
	// reported within a second or two, not at the timeout: check every
	// name's server while waiting.
	check := time.NewTicker(checkTick)
	defer check.Stop()
	started := time.Now()
	for {
		select {
		case <-g.all:
			return skip
		case <-check.C:
			if !g.allFailing(started) {
				continue
			}
		case <-deadline.C:
		}
		g.mu.Lock()
		for _, n := range g.names {
			if g.done[n] {
				continue
			}
			if why := NotReached(g.c, n, g.timeout, g.hint); why != "" {
				g.done[n], skip[n] = true, true
				if !slices.Contains(g.unreachable, why) {
					g.unreachable = append(g.unreachable, why)
				}
			}
		}
		// The rest were asked of a server that was reached and said
		// nothing of them: they are reported as unanswered.
		g.finished()
		g.mu.Unlock()
		return skip
	}
}

// allFailing reports whether every name not done has a server failing
// since FastFail after started.
func (g *getter) allFailing(started time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.names {
		if !g.done[n] && (time.Since(started) < FastFail || !Failing(g.c, n)) {
			return false
		}
	}
	return true
}

// answer is the names' latest states, freezing them.
func (g *getter) answer(skip map[string]bool) *Answer {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frozen = true
	a := &Answer{Unreachable: g.unreachable, timeout: g.timeout}
	printed := map[string]bool{}
	for _, n := range g.names {
		if printed[n] || skip[n] {
			continue // asked for twice: reported once; or not reached: in Unreachable
		}
		printed[n] = true
		for _, r := range g.states[n].results(g.typ, n) {
			if r.Status != "" || r.Error != "" {
				a.Failed = true
			}
			if r.Status == StatusNoAnswer {
				a.Unanswered = append(a.Unanswered, r.Name)
			}
			a.Results = append(a.Results, r)
		}
	}
	return a
}

// nameState is what get knows of one requested name: the latest word on
// it (a glob's or the wildcard's: the latest of each member, and of the
// collection itself).
type nameState struct {
	heard   bool
	latest  *Result           // a single name
	members map[string]Result // a glob's or the wildcard's members
	own     *Result           // a glob's or the wildcard's own status: does-not-exist, or an error
}

// note records an event as the latest word on the name, or on a member.
func (st *nameState) note(e client.Event, typ *resource.Type, multi bool) {
	st.heard = true
	r := Render(e, typ)
	r.Event = ""
	if !multi {
		st.latest = &r
		return
	}
	// A collection watcher is told of members as they come and go, and
	// of the collection itself when it is empty or in error.
	switch e.Kind {
	case client.Updated:
		if st.members == nil {
			st.members = map[string]Result{}
		}
		st.members[e.Name] = r
		st.own = nil // a later answer: the collection has members
	case client.Removed:
		delete(st.members, e.Name)
	default:
		st.own = &r
	}
}

// results lists the name's latest state: n's own, a collection's members
// in name order (and its own status), or, when nothing was heard,
// no-answer.
func (st *nameState) results(typ *resource.Type, n string) []Result {
	var rs []Result
	if st.latest != nil {
		rs = append(rs, *st.latest)
	}
	names := make([]string, 0, len(st.members))
	for m := range st.members {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		rs = append(rs, st.members[m])
	}
	if st.own != nil && (len(names) == 0 || st.own.Error != "") {
		rs = append(rs, *st.own)
	}
	if len(rs) == 0 {
		rs = []Result{{Resource: admin.Resource{Type: typ.Name, Name: n}, Status: StatusNoAnswer}}
	}
	return rs
}

// Failing reports whether n's server has never been reached and its last
// attempt failed (refused, unreachable, not an xDS server).
func Failing(c *client.Client, n string) bool {
	u, err := c.UpstreamFor(n)
	return err != nil || (u.Connected == "" && u.LastError != "")
}

// NotReached says why a name's server was not reached, or "" when it was
// (a stream is up, or open and not failing). hint, when set, may say what
// likely went wrong with a server (what else listens on its port), on a
// line of its own.
func NotReached(c *client.Client, n string, timeout time.Duration, hint func(server string) string) string {
	u, err := c.UpstreamFor(n)
	switch {
	case err != nil:
		return err.Error()
	case u.Connected != "", u.Connecting != "" && u.LastError == "":
		return ""
	}
	servers := "xDS server " + strings.Join(u.Servers, ", ")
	if len(u.Servers) > 1 {
		servers = "xDS servers " + strings.Join(u.Servers, ", ")
	}
	if u.LastError == "" {
		return fmt.Sprintf("cannot reach %s: no connection within %v", servers, timeout)
	}
	// The error names the server it came from; say it once.
	why := u.LastError
	if len(u.Servers) == 1 {
		why = strings.TrimPrefix(why, u.Servers[0]+": ")
	}
	if strings.Contains(why, "PermissionDenied") || strings.Contains(why, "Unauthenticated") {
		// Reached, and refused: its policy, or a certificate it did not take.
		return fmt.Sprintf("%s refused the stream: %s", servers, why)
	}
	for _, srv := range u.Servers {
		if hint == nil {
			break
		}
		if h := hint(srv); h != "" {
			why += "\n  " + h
		}
	}
	return fmt.Sprintf("cannot reach %s: %s", servers, why)
}
