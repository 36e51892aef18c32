package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/resource"
)

// printDocErrors prints every problem of an invalid input, one per line.
func printDocErrors(w io.Writer, err error) {
	var l resource.ErrorList
	if errors.As(err, &l) {
		for _, e := range l {
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}

// noFileArgs is noArgs for commands that take -f: a path given without
// it is pointed at -f.
func noFileArgs(pos []string, file string) error {
	if len(pos) > 0 && file == "" {
		return usagef("unexpected argument %q: files are given with -f (did you mean -f %s?)", pos[0], pos[0])
	}
	return noArgs(pos)
}

// errInvalid is returned after the problems were printed.
var errInvalid = errors.New("invalid input")

// loadDocs loads the documents -f names; it prints any problems, each
// with its file, document, line and path.
func loadDocs(file string, stderr io.Writer) ([]*resource.Document, error) {
	if file == "" {
		return nil, usagef("-f FILE|DIR|- is required")
	}
	docs, err := resource.Load(file)
	if err != nil {
		printDocErrors(stderr, err)
		return nil, errInvalid
	}
	return docs, nil
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	file := fs.String("f", "", "file, directory or - (standard input) to check")
	pos, err := parse(fs, args, "validate -f FILE|DIR|-", stdout)
	if err != nil {
		return err
	}
	if err := noFileArgs(pos, *file); err != nil {
		return err
	}
	docs, err := loadDocs(*file, stderr)
	if err != nil {
		return err
	}
	resources := map[[2]string]bool{}
	for _, d := range docs {
		resources[[2]string{d.Variant.Type.URL, d.Variant.Name}] = true
	}
	fmt.Fprintf(stdout, "ok: %s (%s)\n", plural(len(resources), "resource"), plural(len(docs), "variant"))
	return nil
}

func adminURL(addr, path string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + path
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// call sends an admin request and decodes a JSON answer into out, or turns
// an error answer into an error.
func call(req *http.Request, out any) error {
	resp, err := httpClient.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "malformed HTTP response") && strings.Contains(err.Error(), `\x00`) {
			// HTTP/2 frames in answer to HTTP/1.1: a gRPC port.
			return fmt.Errorf("admin API at %s answered with HTTP/2 frames: that looks like the xDS (gRPC) port; "+
				"the admin API is on the server's --admin-addr (default 127.0.0.1:18001)", req.URL.Host)
		}
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb admin.ErrorBody
		if json.Unmarshal(body, &eb) != nil || eb.Message == "" {
			return fmt.Errorf("admin API: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		msg := eb.Message
		for _, e := range eb.Errors {
			msg += "\n  " + (&resource.DocError{Source: e.Source, Index: e.Document, Line: e.Line, Column: e.Column, Path: e.Path, Msg: e.Message}).Error()
		}
		return errors.New(msg)
	}
	return json.Unmarshal(body, out)
}

func runApply(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	addr := fs.String("admin", "127.0.0.1:18001", "admin API address of the server")
	file := fs.String("f", "", "file, directory or - (standard input) to apply, as one batch")
	pos, err := parse(fs, args, "apply [--admin ADDR] -f FILE|DIR|-", stdout)
	if err != nil {
		return err
	}
	if err := noFileArgs(pos, *file); err != nil {
		return err
	}
	// Validate here, so errors name the user's files; send the documents as
	// written, so the server applies exactly them.
	docs, err := loadDocs(*file, stderr)
	if errors.Is(err, errInvalid) {
		return fmt.Errorf("%w; nothing was applied", err)
	} else if err != nil {
		return err
	}
	raws := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		raws[i] = d.Raw
	}
	body, err := json.Marshal(raws)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, adminURL(*addr, "/v1/apply?source="+url.QueryEscape(*file)), bytes.NewReader(body))
	if err != nil {
		return usagef("--admin %q: %v", *addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	var res admin.ApplyResult
	if err := call(req, &res); err != nil {
		return err
	}
	printResult(stdout, res)
	return nil
}

func printResult(w io.Writer, res admin.ApplyResult) {
	if len(res.Changed)+len(res.Deleted) == 0 {
		fmt.Fprintf(w, "unchanged at revision %d\n", res.Revision)
		return
	}
	fmt.Fprintf(w, "revision %d: %s changed, %s deleted\n", res.Revision, plural(len(res.Changed), "variant"), plural(len(res.Deleted), "variant"))
	for _, k := range res.Changed {
		fmt.Fprintf(w, "  changed %s\n", k)
	}
	for _, k := range res.Deleted {
		fmt.Fprintf(w, "  deleted %s\n", k)
	}
}

func runDelete(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	addr := fs.String("admin", "127.0.0.1:18001", "admin API address of the server")
	cons := fs.String("constraints", "", "delete only the variant with these constraints (text syntax)")
	force := fs.Bool("force", false, "delete even a resource that a file of the server's --watch directory defines")
	pos, err := parse(fs, args, "delete [--admin ADDR] [--force] TYPE NAME [--constraints EXPR]", stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want TYPE NAME, got %d arguments", len(pos))
	}
	typ, err := resource.Lookup(pos[0])
	if err != nil {
		return usagef("%v", err)
	}
	n, err := resource.CanonicalName(pos[1])
	if err != nil {
		return usagef("%v", err)
	}
	q := url.Values{"type": {typ.URL}, "name": {n}}
	constrained := false
	fs.Visit(func(f *flag.Flag) { constrained = constrained || f.Name == "constraints" })
	if constrained {
		if _, err := constraint.Parse(*cons); err != nil {
			return usagef("--constraints: %v", err)
		}
		q.Set("constraints", *cons)
	}
	if *force {
		q.Set("force", "true")
	}
	req, err := http.NewRequest(http.MethodDelete, adminURL(*addr, "/v1/resources?"+q.Encode()), nil)
	if err != nil {
		return usagef("--admin %q: %v", *addr, err)
	}
	var res admin.ApplyResult
	if err := call(req, &res); err != nil {
		return err
	}
	printResult(stdout, res)
	return nil
}
