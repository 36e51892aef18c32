package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/xdsd/xdsd/resource"
)

// clientStatus is what status reads of /v1/clients.
type clientStatus struct {
	NodeID   string            `json:"node_id"`
	Identity string            `json:"identity,omitempty"`
	Address  string            `json:"address"`
	Agent    string            `json:"agent,omitempty"`
	Replica  string            `json:"replica,omitempty"`
	Params   map[string]string `json:"node_params,omitempty"`
	Types    []struct {
		Type         string `json:"type"`
		SentVersion  string `json:"sent_version"`
		SentNonce    string `json:"sent_nonce"`
		AckedVersion string `json:"acked_version"`
		AckedNonce   string `json:"acked_nonce"`
		LastNack     *struct {
			Nonce    string `json:"nonce"`
			Version  string `json:"version"`
			LastGood string `json:"last_good_version"`
			Error    string `json:"error"`
		} `json:"last_nack"`
	} `json:"types"`
}

// statusReport is what `xdsd status -o yaml|json` prints.
type statusReport struct {
	Summary []typeSummary  `json:"summary"`
	Clients []clientReport `json:"clients"`
	// Unreachable are the replicas that did not answer ("NAME: ERROR"):
	// their clients are not listed.
	Unreachable []string `json:"unreachable_replicas,omitempty"`
}

// typeSummary counts the clients of one type by their state.
type typeSummary struct {
	Type    string `json:"type"`
	Clients int    `json:"clients"`
	Synced  int    `json:"synced"` // ACKed the latest the server sent (at --revision or later, when given)
	NACKed  int    `json:"nacked"` // rejected the latest the server sent
	Pending int    `json:"pending"`
}

// clientReport is one client's state per type.
type clientReport struct {
	Node     string            `json:"node"`
	Identity string            `json:"identity,omitempty"`
	Address  string            `json:"address"`
	Agent    string            `json:"agent,omitempty"`
	Replica  string            `json:"replica,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	Types    []clientType      `json:"types"`
}

// clientType is one client's state for one type.
type clientType struct {
	Type    string `json:"type"`
	State   string `json:"state"` // synced, nacked, pending
	Acked   string `json:"acked_version,omitempty"`
	Sent    string `json:"sent_version,omitempty"`
	NACK    string `json:"last_nack,omitempty"`
	NACKFor string `json:"nacked_version,omitempty"`
}

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server or relay")
	rev := fs.Int64("revision", 0, "count a client as synced only once it ACKed this revision or a later one")
	output := fs.String("o", "text", "output format: text, yaml or json")
	pos, err := parse(fs, args, "status [--admin ADDR] [--revision N] [-o text|yaml|json]", stdout)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if *output != "text" && *output != "yaml" && *output != "json" {
		return usagef("-o %q: want text, yaml or json", *output)
	}
	req, err := ac.request(http.MethodGet, "/v1/clients", nil)
	if err != nil {
		return err
	}
	var clients []clientStatus
	answer := &withHeader{Body: &clients}
	if err := ac.do(httpClient, req, answer); err != nil {
		return err
	}
	rep := buildStatus(clients, *rev)
	// A replica that did not answer is named (its clients are missing),
	// on standard error whatever the format, and in the report.
	rep.Unreachable = answer.Header.Values("X-Xdsd-Incomplete")
	for _, u := range rep.Unreachable {
		fmt.Fprintf(stderr, "xdsd status: warning: replica %s (its clients are not listed)\n", u)
	}
	if *output == "text" {
		if err := printStaged(ac, stdout); err != nil {
			return err
		}
	}
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	case "yaml":
		js, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		y, err := resource.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = stdout.Write(y)
		return err
	}
	printStatus(stdout, rep, *rev)
	return nil
}

func buildStatus(clients []clientStatus, rev int64) statusReport {
	rep := statusReport{Summary: []typeSummary{}, Clients: []clientReport{}}
	sums := map[string]*typeSummary{}
	for _, c := range clients {
		cr := clientReport{Node: c.NodeID, Identity: c.Identity, Address: c.Address, Agent: c.Agent, Replica: c.Replica, Params: c.Params, Types: []clientType{}}
		for _, t := range c.Types {
			ct := clientType{Type: short(t.Type), Acked: t.AckedVersion, Sent: t.SentVersion}
			switch {
			case t.LastNack != nil && t.LastNack.Nonce == t.SentNonce && t.SentNonce != "":
				ct.State, ct.NACK, ct.NACKFor = "nacked", t.LastNack.Error, t.LastNack.Version
			case t.SentNonce != "" && t.AckedNonce == t.SentNonce && atLeast(t.AckedVersion, rev):
				ct.State = "synced"
			default:
				ct.State = "pending"
			}
			cr.Types = append(cr.Types, ct)
			s := sums[ct.Type]
			if s == nil {
				s = &typeSummary{Type: ct.Type}
				sums[ct.Type] = s
			}
			s.Clients++
			switch ct.State {
			case "synced":
				s.Synced++
			case "nacked":
				s.NACKed++
			default:
				s.Pending++
			}
		}
		rep.Clients = append(rep.Clients, cr)
	}
	for _, s := range sums {
		rep.Summary = append(rep.Summary, *s)
	}
	sort.Slice(rep.Summary, func(i, j int) bool { return rep.Summary[i].Type < rep.Summary[j].Type })
	return rep
}

// atLeast reports whether a version (a revision, or a revision and a
// hash) is at revision rev or later; any version is, for rev 0.
func atLeast(version string, rev int64) bool {
	if rev <= 0 {
		return true
	}
	r, _, _ := strings.Cut(version, "-")
	n, err := strconv.ParseInt(r, 10, 64)
	return err == nil && n >= rev
}

// short names a type by its alias when it has one (rds, cds, …).
func short(typeName string) string {
	for alias, full := range map[string]string{
		"lds": "envoy.config.listener.v3.Listener", "rds": "envoy.config.route.v3.RouteConfiguration",
		"cds": "envoy.config.cluster.v3.Cluster", "eds": "envoy.config.endpoint.v3.ClusterLoadAssignment",
		"sds": "envoy.extensions.transport_sockets.tls.v3.Secret", "vhds": "envoy.config.route.v3.VirtualHost",
		"srds": "envoy.config.route.v3.ScopedRouteConfiguration", "rtds": "envoy.service.runtime.v3.Runtime",
		"ecds": "envoy.config.core.v3.TypedExtensionConfig",
	} {
		if full == typeName {
			return alias
		}
	}
	return typeName
}

func printStatus(w io.Writer, rep statusReport, rev int64) {
	at := ""
	if rev > 0 {
		at = fmt.Sprintf(" at revision %d or later", rev)
	}
	if len(rep.Clients) == 0 {
		if len(rep.Unreachable) > 0 {
			fmt.Fprintln(w, "no client connected to the replicas that answered")
			return
		}
		fmt.Fprintln(w, "no client connected")
		return
	}
	for _, s := range rep.Summary {
		fmt.Fprintf(w, "%s: %d/%d synced%s, %d NACKed, %d pending\n", s.Type, s.Synced, s.Clients, at, s.NACKed, s.Pending)
	}
	fmt.Fprintln(w)
	for _, c := range rep.Clients {
		var params []string
		for k, v := range c.Params {
			params = append(params, k+"="+v)
		}
		sort.Strings(params)
		who := c.Node
		if c.Identity != "" {
			who += " (" + c.Identity + ")"
		}
		where := c.Address
		if c.Replica != "" {
			where += " on replica " + c.Replica
		}
		fmt.Fprintf(w, "%s %s %s\n", who, where, strings.Join(params, " "))
		for _, t := range c.Types {
			switch t.State {
			case "nacked":
				fmt.Fprintf(w, "  %-5s NACKed version %s (holds %s): %s\n", t.Type, t.NACKFor, t.Acked, t.NACK)
			default:
				fmt.Fprintf(w, "  %-5s %s, ACKed %s (sent %s)\n", t.Type, t.State, t.Acked, t.Sent)
			}
		}
	}
}
