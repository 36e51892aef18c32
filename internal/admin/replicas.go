package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/xdsd/xdsd/internal/fleet"
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
// and go.

// replicaTimeout bounds one question to another replica.
const replicaTimeout = 5 * time.Second

var replicaClient = &http.Client{Timeout: replicaTimeout}

// local reports whether a request asks for this replica's answer alone.
func local(r *http.Request) bool { return r.URL.Query().Get("local") == "true" }

// others lists the other live replicas' admin URLs by name, or none (a
// lone server, or a request that asks for this one alone).
func (a *api) others(r *http.Request) map[string]string {
	if a.o.Replicas == nil || local(r) {
		return nil
	}
	others, err := a.o.Replicas(r.Context())
	if err != nil {
		a.o.Logger.Warn("listing the replicas failed; answering for this one alone", "error", err)
		return nil
	}
	return others
}

// askReplicas asks each of the other replicas GET path?query&local=true,
// with the caller's credentials, and hands each answer's body to fn (one
// call at a time). It returns the replicas that did not answer, with why.
func (a *api) askReplicas(r *http.Request, path string, q url.Values, fn func(name string, body []byte) error) map[string]error {
	others := a.others(r)
	if len(others) == 0 {
		return nil
	}
	q = cloneValues(q)
	q.Set("local", "true")
	var (
		mu     sync.Mutex
		failed = map[string]error{}
		wg     sync.WaitGroup
	)
	for name, base := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := a.askReplica(r, base+path+"?"+q.Encode())
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = fn(name, body)
			}
			if err != nil {
				failed[name] = err
				a.o.Logger.Warn("a replica did not answer", "replica", name, "url", base, "error", err)
			}
		}()
	}
	wg.Wait()
	return failed
}

func (a *api) askReplica(r *http.Request, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), replicaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if h := r.Header.Get("Authorization"); h != "" {
		req.Header.Set("Authorization", h)
	}
	resp, err := replicaClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return body, nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// fleetGroups is Options.Groups merged with the other replicas'.
func (a *api) fleetGroups(r *http.Request) ([]fleet.Group, error) {
	gs, err := a.o.Groups(r.Context())
	if err != nil {
		return nil, err
	}
	lists := [][]fleet.Group{gs}
	failed := a.askReplicas(r, "/v1/groups", nil, func(_ string, body []byte) error {
		var l GroupList
		if err := json.Unmarshal(body, &l); err != nil {
			return err
		}
		lists = append(lists, l.Groups)
		return nil
	})
	if len(failed) > 0 {
		return fleet.Merge(lists...), missing(failed)
	}
	return fleet.Merge(lists...), nil
}

// missing says which replicas did not answer.
func missing(failed map[string]error) error {
	names := make([]string, 0, len(failed))
	for n := range failed {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Errorf("replicas that did not answer, whose clients are missing: %v (%v)", names, failed[names[0]])
}

// fleetClients is /v1/clients fleet-wide: this replica's clients and the
// other replicas', each naming its replica.
func (a *api) fleetClients(r *http.Request) (any, error) {
	mine := a.o.Clients()
	if a.others(r) == nil {
		return mine, nil
	}
	b, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	var all []json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	failed := a.askReplicas(r, "/v1/clients", nil, func(_ string, body []byte) error {
		var theirs []json.RawMessage
		if err := json.Unmarshal(body, &theirs); err != nil {
			return err
		}
		all = append(all, theirs...)
		return nil
	})
	if len(failed) > 0 {
		return all, missing(failed)
	}
	return all, nil
}

// fleetRollout is Options.Rollout merged with the other replicas': a
// replica that does not answer (or does not hold the revision yet) leaves
// the rollout not done.
func (a *api) fleetRollout(r *http.Request, rev int64, changes []store.Change) rollout.Report {
	rep := a.o.Rollout(rev, changes)
	failed := a.askReplicas(r, "/v1/rollout", url.Values{"rev": {fmt.Sprint(rev)}}, func(_ string, body []byte) error {
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
	}
	return rep
}
