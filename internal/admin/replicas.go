package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
)

// Across replicas (docs/fleet.md): replicas sharing an etcd store each
// register their admin API's URL under a lease (Options.Replicas lists
// the live ones). A fleet question asked of one replica is answered from
// its own index and, fanned out, from every other live replica's, asked
// with ?local=true so that it answers for itself alone; the answers are
// merged. Each answer is computed where the streams are, so per-client
// answers are complete and nothing is copied into etcd as clients come
// and go. A replica that does not answer is named in the answer
// (fleet.Unreachable), never silently left out.

// replicaTimeout bounds one question to another replica.
const replicaTimeout = 5 * time.Second

// maxReplicaAnswer bounds what one replica's answer may hold (its
// clients' status, for a batch of many resources: the guard's question).
const maxReplicaAnswer = 512 << 20

var replicaClient = &http.Client{Timeout: replicaTimeout}

// PeerClient returns an HTTP client for Options.PeerClient that asks the
// other replicas over TLS configured by c (the CAs it trusts, from xdsd
// serve --admin-peer-ca; a client certificate to present), or with the
// system's roots when c is nil.
func PeerClient(c *tls.Config) *http.Client {
	if c == nil {
		return replicaClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c
	return &http.Client{Timeout: replicaTimeout, Transport: tr}
}

// local reports whether a request asks for this replica's answer alone.
func local(r *http.Request) bool { return r.URL.Query().Get("local") == "true" }

// others lists the other live replicas' admin URLs by name, or none (a
// lone server, or a request that asks for this one alone). Listing them
// failing (etcd unreachable) is reported as a replica of its own, so
// that the answer says it may be incomplete.
func (a *api) others(r *http.Request) (map[string]string, []fleet.Unreachable) {
	if a.o.Replicas == nil || local(r) {
		return nil, nil
	}
	others, err := a.o.Replicas(r.Context())
	if err != nil {
		a.o.Logger.Warn("listing the replicas failed; answering for this one alone", "error", err)
		return nil, []fleet.Unreachable{{Replica: "(the other replicas: their list could not be read)", Error: err.Error()}}
	}
	return others, nil
}

// askReplicas asks each of the other replicas path?query&local=true
// (GET, or POST with body when body is not nil), with the replica's own
// credentials or the caller's, and hands each answer's body to fn (one
// call at a time). It returns the replicas that did not answer, with
// why, sorted by name.
func (a *api) askReplicas(r *http.Request, path string, q url.Values, body []byte, fn func(name string, body []byte) error) []fleet.Unreachable {
	others, failed := a.others(r)
	return append(failed, a.ask(r, others, path, q, body, fn)...)
}

// ask asks the replicas named in others (name → admin URL), as
// askReplicas.
func (a *api) ask(r *http.Request, others map[string]string, path string, q url.Values, body []byte, fn func(name string, body []byte) error) []fleet.Unreachable {
	if len(others) == 0 {
		return nil
	}
	q = cloneValues(q)
	q.Set("local", "true")
	var (
		mu     sync.Mutex
		failed []fleet.Unreachable
		wg     sync.WaitGroup
	)
	for name, base := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answer, err := a.askReplica(r, base+path+"?"+q.Encode(), body)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = fn(name, answer)
			}
			if err != nil {
				failed = append(failed, fleet.Unreachable{Replica: name, Error: err.Error()})
				a.warnSilent(name, base, err)
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(failed, func(x, y fleet.Unreachable) int { return strings.Compare(x.Replica, y.Replica) })
	return failed
}

// silentLogEvery bounds how often one silent replica is logged: apply
// --wait asks ten times a second while a dead one keeps its lease.
const silentLogEvery = 10 * time.Second

// warnSilent logs that a replica did not answer, at most once per
// silentLogEvery for each (every answer names it anyway).
func (a *api) warnSilent(name, base string, err error) {
	now := time.Now()
	if last, ok := a.silent.Load(name); ok && now.Sub(last.(time.Time)) < silentLogEvery {
		return
	}
	a.silent.Store(name, now)
	a.o.Logger.Warn("a replica did not answer", "replica", name, "url", base, "error", err)
}

func (a *api) askReplica(r *http.Request, u string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), replicaTimeout)
	defer cancel()
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	// The replica asks as itself when it has a token of its own
	// (--admin-peer-token-file); otherwise with the caller's (a caller
	// who came with a client certificate has none to pass on).
	if a.o.PeerToken != nil {
		tok, err := a.o.PeerToken()
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	} else if h := r.Header.Get("Authorization"); h != "" {
		req.Header.Set("Authorization", h)
	}
	c := a.o.PeerClient
	if c == nil {
		c = replicaClient
	}
	resp, err := c.Do(req)
	if err != nil {
		var unknown x509.UnknownAuthorityError
		if errors.As(err, &unknown) {
			return nil, fmt.Errorf("%w (its admin certificate is not signed by a CA this replica trusts: give xdsd serve --admin-peer-ca)", err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxReplicaAnswer+1))
	if err != nil {
		return nil, err
	}
	if len(answer) > maxReplicaAnswer {
		return nil, fmt.Errorf("its answer is larger than %d bytes", maxReplicaAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(answer))
		var eb ErrorBody
		if json.Unmarshal(answer, &eb) == nil && eb.Message != "" {
			msg = eb.Message
		}
		err := fmt.Errorf("%s: %s", resp.Status, msg)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			err = fmt.Errorf("%w (give xdsd serve --admin-peer-token-file, or --admin-peer-cert and --admin-peer-key, a credential the other replicas accept)", err)
		}
		return nil, err
	}
	return answer, nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// markIncomplete names, in the X-Xdsd-Incomplete header (one value per
// replica, "NAME: ERROR"), the replicas whose clients an answer lacks.
func markIncomplete(w http.ResponseWriter, un []fleet.Unreachable) {
	for _, u := range un {
		// A header value is one line.
		w.Header().Add("X-Xdsd-Incomplete", strings.Join(strings.Fields(u.String()), " "))
	}
}

// fleetGroups is Options.Groups merged with the other replicas'.
func (a *api) fleetGroups(r *http.Request) ([]fleet.Group, []fleet.Unreachable, error) {
	gs, err := a.o.Groups(r.Context())
	if err != nil {
		return nil, nil, err
	}
	lists := [][]fleet.Group{gs}
	failed := a.askReplicas(r, "/v1/groups", nil, nil, func(_ string, body []byte) error {
		var l GroupList
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		lists = append(lists, l.Groups)
		return nil
	})
	return fleet.Merge(lists...), failed, nil
}

// fleetClients is /v1/clients fleet-wide: this replica's clients and the
// other replicas', each naming its replica.
func (a *api) fleetClients(r *http.Request) (any, []fleet.Unreachable, error) {
	mine := a.o.Clients()
	others, failed := a.others(r)
	if len(others) == 0 {
		return mine, failed, nil
	}
	// The answers are joined as JSON arrays, never decoded: this
	// replica's clients are encoded once, as a lone server's are.
	b, err := json.Marshal(mine)
	if err != nil {
		return nil, nil, err
	}
	theirs := map[string]json.RawMessage{}
	failed = append(failed, a.ask(r, others, "/v1/clients", nil, nil, func(name string, body []byte) error {
		if !json.Valid(body) || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			return fmt.Errorf("its /v1/clients is not a JSON list")
		}
		theirs[name] = body
		return nil
	})...)
	// This replica's clients first, then each other's by name.
	all := []json.RawMessage{b}
	for _, n := range slices.Sorted(maps.Keys(theirs)) {
		all = append(all, theirs[n])
	}
	return joinArrays(all), failed, nil
}

// joinArrays joins JSON arrays (or nulls: none) into one.
func joinArrays(arrays []json.RawMessage) json.RawMessage {
	out := []byte{'['}
	for _, a := range arrays {
		a = bytes.TrimSpace(a)
		if len(a) < 2 || a[0] != '[' {
			continue // null
		}
		inner := bytes.TrimSpace(a[1 : len(a)-1])
		if len(inner) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, inner...)
	}
	return append(out, ']')
}

// fleetRollout is Options.Rollout merged with the other replicas': a
// replica that does not answer leaves the rollout not done, and is named
// in it.
func (a *api) fleetRollout(r *http.Request, rev int64, changes []store.Change) rollout.Report {
	rep := a.o.Rollout(rev, changes)
	failed := a.askReplicas(r, "/v1/rollout", url.Values{"rev": {fmt.Sprint(rev)}}, nil, func(_ string, body []byte) error {
		var theirs rollout.Report
		if err := json.Unmarshal(body, &theirs); err != nil {
			return err
		}
		rep.Acked += theirs.Acked
		rep.Nacked += theirs.Nacked
		rep.Pending += theirs.Pending
		rep.Unserved += theirs.Unserved
		rep.Entries = append(rep.Entries, theirs.Entries...)
		rep.Done = rep.Done && theirs.Done
		return nil
	})
	if len(failed) > 0 {
		rep.Done = false
		rep.Unreachable = failed
	}
	return rep
}

// fleetConcerned is Options.Concerned asked of every replica: the
// clients of the whole fleet that subscribe to the resources of ch (the
// stranded-client guard's question), each naming its replica.
func (a *api) fleetConcerned(r *http.Request, ch protocol.Changed) ([]protocol.StreamStatus, []fleet.Unreachable, error) {
	mine, err := a.o.Concerned(r.Context(), ch)
	if err != nil {
		return nil, nil, err
	}
	others, failed := a.others(r)
	if len(others) == 0 {
		return mine, failed, nil
	}
	body, err := json.Marshal(ch)
	if err != nil {
		return nil, nil, err
	}
	failed = append(failed, a.ask(r, others, "/v1/concerned", nil, body, func(_ string, body []byte) error {
		var theirs []protocol.StreamStatus
		if err := json.Unmarshal(body, &theirs); err != nil {
			return err
		}
		mine = append(mine, theirs...)
		return nil
	})...)
	return mine, failed, nil
}

// concerned answers POST /v1/concerned: the clients subscribed to the
// resources named in the body (protocol.Changed as JSON: type URL →
// names), with their state of those resources alone. Replicas ask it of
// one another for the stranded-client guard; it only reads.
func (a *api) concerned(w http.ResponseWriter, r *http.Request) {
	if a.o.Concerned == nil {
		writeError(w, http.StatusNotFound, errors.New("this process serves no clients"))
		return
	}
	var ch protocol.Changed
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReplicaAnswer))
	if err := dec.Decode(&ch); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf(`the body: %v: want a JSON object of type URLs to resource names, such as {"type.googleapis.com/envoy.config.cluster.v3.Cluster": ["a", "b"]}`, err))
		return
	}
	cs, failed, err := a.fleetConcerned(r, ch)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	markIncomplete(w, failed)
	if cs == nil {
		cs = []protocol.StreamStatus{}
	}
	writeJSON(w, http.StatusOK, cs)
}

// ClientPage is the body of GET /v1/clients/page: one window of the
// connected clients matching a search, fleet-wide, and how many match.
type ClientPage struct {
	Matched int                     `json:"matched"`
	Clients []protocol.StreamStatus `json:"clients"`
	// Unreachable are the replicas that did not answer: their clients
	// are neither listed nor counted.
	Unreachable []fleet.Unreachable `json:"unreachable_replicas,omitempty"`
}

// fleetPage is Options.Page over the whole fleet: this replica's matches
// first, in connection order, then each other replica's, by name. It
// asks each other replica how many of its clients match, then only those
// whose matches fall in the window for them.
func (a *api) fleetPage(r *http.Request, q protocol.ClientQuery) (ClientPage, error) {
	mine, err := a.o.Page(r.Context(), q)
	if err != nil {
		return ClientPage{}, err
	}
	out := ClientPage{Matched: mine.Matched, Clients: mine.Clients}
	others, failed := a.others(r)
	out.Unreachable = failed
	if len(others) == 0 {
		return out, nil
	}
	// How many each matches (offset past any: a count alone).
	counts := map[string]int{}
	out.Unreachable = append(out.Unreachable, a.ask(r, others, "/v1/clients/page", pageQuery(q.Node, math.MaxInt32, 1), nil, func(name string, body []byte) error {
		var p ClientPage
		if err := json.Unmarshal(body, &p); err != nil {
			return err
		}
		counts[name] = p.Matched
		return nil
	})...)
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	slices.Sort(names)
	start := mine.Matched // where each replica's matches begin in the whole list
	windows := map[string]url.Values{}
	for _, n := range names {
		lo := max(q.Offset-start, 0)
		hi := counts[n]
		if q.Limit > 0 {
			hi = min(hi, q.Offset+q.Limit-start)
		}
		if lo < hi {
			windows[n] = pageQuery(q.Node, lo, hi-lo)
		}
		start += counts[n]
		out.Matched += counts[n]
	}
	pages := map[string][]protocol.StreamStatus{}
	for n, wq := range windows {
		// One request per replica and window (a page spans few replicas).
		failed := a.ask(r, map[string]string{n: others[n]}, "/v1/clients/page", wq, nil, func(name string, body []byte) error {
			var p ClientPage
			if err := json.Unmarshal(body, &p); err != nil {
				return err
			}
			pages[name] = p.Clients
			return nil
		})
		out.Unreachable = append(out.Unreachable, failed...)
	}
	for _, n := range names {
		out.Clients = append(out.Clients, pages[n]...)
	}
	slices.SortFunc(out.Unreachable, func(x, y fleet.Unreachable) int { return strings.Compare(x.Replica, y.Replica) })
	return out, nil
}

func pageQuery(node string, offset, limit int) url.Values {
	q := url.Values{"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(limit)}}
	if node != "" {
		q.Set("node", node)
	}
	return q
}

// clientPage answers GET /v1/clients/page?node=&offset=&limit=: a window
// of the matching clients (limit at most maxPageLimit), fleet-wide.
func (a *api) clientPage(w http.ResponseWriter, r *http.Request) {
	if a.o.Page == nil {
		writeError(w, http.StatusNotFound, errors.New("this process serves no clients"))
		return
	}
	offset, err := countParam(r, "offset", 0, math.MaxInt32)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	limit, err := countParam(r, "limit", pageClients, maxPageLimit)
	if err == nil && limit < 1 {
		err = fmt.Errorf("limit=0: want 1 to %d clients", maxPageLimit)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	p, err := a.fleetPage(r, protocol.ClientQuery{Node: r.URL.Query().Get("node"), Offset: offset, Limit: limit})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	markIncomplete(w, p.Unreachable)
	if p.Clients == nil {
		p.Clients = []protocol.StreamStatus{}
	}
	writeJSON(w, http.StatusOK, p)
}

// maxPageLimit bounds the clients one GET /v1/clients/page lists.
const maxPageLimit = 1000

// countParam reads a whole number from 0 to most, def when absent.
func countParam(r *http.Request, key string, def, most int) (int, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > most {
		return 0, fmt.Errorf("%s=%q: want a whole number from 0 to %d", key, s, most)
	}
	return n, nil
}

// FleetRollout is GET /v1/rollout?rev=REV asked by the server itself: the
// rollout of revision rev over the streams of every live replica (this
// one's through o.Rollout, the others' asked with ?local=true, with the
// replica's own credentials: o.PeerToken, o.PeerClient), narrowed to the
// canary when rev was staged. A replica that did not answer is listed in
// the report's Unreachable. The server asks it before it promotes a
// baked revision, so that a canary client's NACK on any replica holds
// the promote off (docs/rollouts.md).
func FleetRollout(ctx context.Context, o Options, rev int64) (rollout.Report, error) {
	if o.Store == nil || o.Rollout == nil {
		return rollout.Report{}, errors.New("this process does not follow rollouts")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	rec, ok, err := store.RecordAt(ctx, o.Store, rev)
	if err != nil {
		return rollout.Report{}, err
	}
	if !ok {
		return rollout.Report{}, fmt.Errorf("revision %d: the store keeps no record of it", rev)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/rollout", nil)
	if err != nil {
		return rollout.Report{}, err
	}
	a := &api{o: o}
	return a.stagedRollout(ctx, a.fleetRollout(r, rev, rec.Changes)), nil
}
