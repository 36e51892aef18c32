package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// typeNameQuery turns optional TYPE [NAME] arguments into the admin
// API's type and name parameters.
func typeNameQuery(pos []string) (url.Values, error) {
	q := url.Values{}
	if len(pos) > 2 {
		return nil, usagef("want at most TYPE NAME after the revisions, got %d more arguments", len(pos))
	}
	if len(pos) > 0 {
		typ, err := resource.Lookup(pos[0])
		if err != nil {
			return nil, usagef("%v", err)
		}
		q.Set("type", typ.URL)
	}
	if len(pos) > 1 {
		n, err := resource.CanonicalName(pos[1])
		if err != nil {
			return nil, usagef("%v", err)
		}
		q.Set("name", n)
	}
	return q, nil
}

func revArg(s, what string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, usagef("%s %q: want a revision number", what, s)
	}
	return n, nil
}

// printJSONOrYAML prints v in the -o format other than text.
func printJSONOrYAML(w io.Writer, format string, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if format == "yaml" {
		y, err := resource.JSONToYAML(js)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	var generic any
	if err := json.Unmarshal(js, &generic); err != nil {
		return err
	}
	return enc.Encode(generic)
}

func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("o", "text", "output format: text, yaml or json")
}

func checkOutput(o string) error {
	if o != "text" && o != "yaml" && o != "json" {
		return usagef("-o %q: want text, yaml or json", o)
	}
	return nil
}

// maxChangesShown bounds the changes history lists per revision.
const maxChangesShown = 10

func runHistory(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	limit := fs.Int("limit", admin.DefaultHistoryLimit, "list at most this many revisions")
	output := outputFlag(fs)
	pos, err := parse(fs, args, "history [--admin ADDR] [--limit N] [-o text|yaml|json] [TYPE [NAME]]", stdout)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if *limit < 1 {
		return usagef("--limit %d: want 1 or more", *limit)
	}
	q, err := typeNameQuery(pos)
	if err != nil {
		return err
	}
	q.Set("limit", strconv.Itoa(*limit))
	req, err := ac.request(http.MethodGet, "/v1/history?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var l store.RevisionList
	if err := ac.do(httpClient, req, &l); err != nil {
		return err
	}
	if *output != "text" {
		return printJSONOrYAML(stdout, *output, l)
	}
	if len(l.Revisions) == 0 {
		fmt.Fprintf(stdout, "no revision (the store is at revision %d; history kept from revision %d)\n", l.Rev, l.Oldest)
		return nil
	}
	for _, r := range l.Revisions {
		fmt.Fprintf(stdout, "revision %d  %s  %s  %s\n", r.Rev, r.Time.Format("2006-01-02 15:04:05Z07:00"), who(r.Audit), plural(r.Total, "change"))
		if line := stageLine(r, l); line != "" {
			fmt.Fprintln(stdout, "  "+line)
		}
		for i, c := range r.Changes {
			if i == maxChangesShown {
				fmt.Fprintf(stdout, "  ... and %d more\n", len(r.Changes)-i)
				break
			}
			fmt.Fprintf(stdout, "  %-7s %s", c.Op, keyText(c.Key))
			if c.Version != "" {
				fmt.Fprintf(stdout, "  (version %s)", c.Version)
			}
			fmt.Fprintln(stdout)
		}
	}
	if last := l.Revisions[len(l.Revisions)-1].Rev; last > l.Oldest+1 && len(l.Revisions) == *limit {
		fmt.Fprintf(stdout, "(older revisions, back to %d: --limit)\n", l.Oldest+1)
	}
	return nil
}

// who says who made a revision, from its audit record.
func who(a store.Audit) string {
	var parts []string
	if a.Who != "" {
		parts = append(parts, a.Who)
	} else {
		parts = append(parts, "(anonymous)")
	}
	if a.From != "" {
		parts = append(parts, "from "+a.From)
	}
	if a.Via != "" {
		parts = append(parts, "via "+a.Via)
	}
	return strings.Join(parts, " ")
}

func keyText(k resource.Key) string {
	s := short(resource.ForURL(k.Type).Name) + " " + k.Name
	if k.Constraints != "" {
		s += " [" + k.Constraints + "]"
	}
	return s
}

func runDiff(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	output := outputFlag(fs)
	pos, err := parse(fs, args, "diff [--admin ADDR] [-o text|yaml|json] REV1 REV2 [TYPE [NAME]]", stdout)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("want REV1 REV2 [TYPE [NAME]], got %d arguments", len(pos))
	}
	from, err := revArg(pos[0], "REV1")
	if err != nil {
		return err
	}
	to, err := revArg(pos[1], "REV2")
	if err != nil {
		return err
	}
	q, err := typeNameQuery(pos[2:])
	if err != nil {
		return err
	}
	q.Set("from", strconv.FormatInt(from, 10))
	q.Set("to", strconv.FormatInt(to, 10))
	req, err := ac.request(http.MethodGet, "/v1/diff?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var d admin.Diff
	if err := ac.do(httpClient, req, &d); err != nil {
		return err
	}
	if *output != "text" {
		return printJSONOrYAML(stdout, *output, d)
	}
	if d.Staged != "" {
		fmt.Fprintln(stdout, "note: "+d.Staged)
	}
	if len(d.Changes) == 0 {
		fmt.Fprintf(stdout, "no difference between revisions %d and %d\n", d.From, d.To)
		return nil
	}
	for _, c := range d.Changes {
		k := short(c.Type) + " " + c.Name
		if c.Constraints != "" {
			k += " [" + c.Constraints + "]"
		}
		fmt.Fprintf(stdout, "%s %s\n%s", c.Op, k, c.Diff)
	}
	return nil
}

func runRollback(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollback", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	pos, err := parse(fs, args, "rollback [--admin ADDR] REV [TYPE [NAME]]", stdout)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("want REV [TYPE [NAME]]: the revision whose state to restore (see xdsd history)")
	}
	rev, err := revArg(pos[0], "REV")
	if err != nil {
		return err
	}
	q, err := typeNameQuery(pos[1:])
	if err != nil {
		return err
	}
	q.Set("rev", strconv.FormatInt(rev, 10))
	req, err := ac.request(http.MethodPost, "/v1/rollback?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var res admin.RollbackResult
	if err := ac.do(httpClient, req, &res); err != nil {
		return err
	}
	if len(res.Changed)+len(res.Deleted) == 0 {
		fmt.Fprintf(stdout, "nothing to roll back: the state is already that of revision %d (at revision %d)\n", res.To, res.Revision)
		return nil
	}
	fmt.Fprintf(stdout, "restored the state of revision %d as ", res.To)
	printResult(stdout, res.ApplyResult)
	return nil
}
