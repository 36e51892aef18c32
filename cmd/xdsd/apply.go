package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/files"
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

// clientFlag registers --client.
func clientFlag(fs *flag.FlagSet) *string {
	return fs.String("client", "envoy", "check what this client would reject: envoy, grpc, or none")
}

// checker returns the client checker a --client value asks for; nil for
// none.
func checker(client string) (*clientcheck.Checker, error) {
	if client == "none" {
		return nil, nil
	}
	c, err := clientcheck.ParseClient(client)
	if err != nil {
		return nil, usagef("--client: %v", err)
	}
	return clientcheck.New(c), nil
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	file := fs.String("f", "", "file, directory or - (standard input) to check")
	client := clientFlag(fs)
	pos, err := parse(fs, args, "validate [--client envoy|grpc|none] -f FILE|DIR|-", stdout)
	if err != nil {
		return err
	}
	if err := noFileArgs(pos, *file); err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f FILE|DIR|- is required")
	}
	check, err := checker(*client)
	if err != nil {
		return err
	}
	// Read as a stream: what is kept of each document is its identity and
	// what the checks across documents need, so a source of any size is
	// checked in bounded memory.
	var (
		set       resource.SetCheck
		variants  int
		resources = map[[2]string]bool{}
	)
	err = files.Walk(*file, func(d *resource.Document) error {
		set.Add(d)
		if check != nil {
			check.Add(d)
		}
		variants++
		resources[[2]string{d.Variant.Type.URL, d.Variant.Name}] = true
		return nil
	})
	var errs resource.ErrorList
	if err != nil && !errors.As(err, &errs) {
		return err
	}
	errs = append(errs, set.Errs()...)
	if len(errs) > 0 {
		printDocErrors(stderr, errs)
		return errInvalid
	}
	summary := fmt.Sprintf("ok: %s (%s)", plural(len(resources), "resource"), plural(variants, "variant"))
	if check != nil {
		if n := printFindings(stderr, check); n > 0 {
			return fmt.Errorf("%d problem(s) %s would reject or wait for in vain", n, check.Client())
		}
		summary += "; " + checkedFor(check)
	}
	fmt.Fprintln(stdout, summary)
	return nil
}

// printFindings prints a checker's findings and returns how many are
// errors.
func printFindings(w io.Writer, check *clientcheck.Checker) int {
	errs := 0
	for _, f := range check.Findings() {
		fmt.Fprintln(w, f.String())
		if f.Severity == clientcheck.Error {
			errs++
		}
	}
	if n := check.Dropped(); n > 0 {
		fmt.Fprintf(w, "... and %d more\n", n)
	}
	return errs
}

// checkedFor says what was checked: "checked for Envoy across 6 parameter
// sets".
func checkedFor(check *clientcheck.Checker) string {
	s := "checked for " + check.Client().String()
	if len(check.Set().Keys()) > 0 {
		s += " across " + plural(len(check.Set().ParamSets()), "parameter set")
	}
	return s
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
func call(c *http.Client, req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		// A request to the wrong port, or in the wrong scheme, fails in
		// ways that name neither: a probe of the port says which.
		if hint := adminMismatch(req.URL.Host, req.URL.Scheme == "https"); hint != "" {
			return fmt.Errorf("admin API: %w\n  %s", err, hint)
		}
		return fmt.Errorf("admin API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := answerError(resp)
		if resp.StatusCode == http.StatusBadRequest && req.URL.Scheme == "http" {
			// net/http's answer to plain HTTP at an HTTPS port.
			if hint := adminMismatch(req.URL.Host, false); hint != "" {
				return fmt.Errorf("%w\n  %s", err, hint)
			}
		}
		return err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	return json.Unmarshal(body, out)
}

// answerError turns an admin API error answer into an error.
func answerError(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("admin API: %s: %w", resp.Status, err)
	}
	var eb admin.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Message == "" {
		return fmt.Errorf("admin API: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	msg := eb.Message
	for _, e := range eb.Errors {
		msg += "\n  " + e.Error()
	}
	return errors.New(msg)
}

// uploadClient sends applies: a large batch takes a while to send and
// store, so it gets more time than other admin requests.
var uploadClient = &http.Client{Timeout: 30 * time.Minute}

func runApply(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	file := fs.String("f", "", "file, directory or - (standard input) to apply, as one batch")
	client := clientFlag(fs)
	force := fs.Bool("force", false, "apply even what the client checks say the client would reject")
	wait := fs.Bool("wait", false, "after the batch commits, wait until every client it concerns has ACKed or NACKed it (exit 3 if any NACKed, 4 on timeout)")
	waitTimeout := fs.Duration("wait-timeout", 60*time.Second, "how long --wait waits")
	pos, err := parse(fs, args, "apply [--admin ADDR] [--client envoy|grpc|none] [--force] [--wait [--wait-timeout 60s]] -f FILE|DIR|-", stdout)
	if err != nil {
		return err
	}
	if err := noFileArgs(pos, *file); err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f FILE|DIR|- is required")
	}
	if *waitTimeout <= 0 || *waitTimeout > time.Hour {
		return usagef("--wait-timeout %v: want a duration from 1s to 1h", *waitTimeout)
	}
	if _, err := checker(*client); err != nil {
		return err
	}
	q := url.Values{"client": {*client}, "list": {strconv.Itoa(maxListed)}}
	if *force {
		q.Set("force", "true")
	}
	paths := []string{"-"}
	if *file != "-" {
		if paths, err = files.List(*file); err != nil {
			return err
		}
	}
	req, err := applyRequest(ac, q, paths, *file)
	if err != nil {
		return err
	}
	var res admin.ApplyResult
	err = ac.do(uploadClient, req, &res)
	req.Body.Close() // stops the writer if the server answered early
	if err != nil {
		return err
	}
	for _, f := range res.Findings {
		fmt.Fprintln(stderr, f.Error())
	}
	printResult(stdout, res)
	if !*wait {
		return nil
	}
	if changed, deleted := counts(res); changed+deleted == 0 {
		fmt.Fprintln(stdout, "nothing changed: no rollout to wait for")
		return nil
	}
	return waitRollout(ac, res.Revision, *waitTimeout, stdout)
}

// applyRequest is the request that sends files to the server as they
// are, read as they are sent: the server decodes and checks them, naming
// each file, and this process holds none of them. A single regular file
// is the body, with its length (the kernel copies it to the socket);
// several, or a pipe, go one part each of a multipart body.
func applyRequest(ac *adminClient, q url.Values, paths []string, named string) (*http.Request, error) {
	if len(paths) == 1 && paths[0] == named && named != "-" {
		f, err := os.Open(named)
		if err != nil {
			return nil, err
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			q.Set("source", named)
			req, err := ac.request(http.MethodPost, "/v1/apply?"+q.Encode(), f)
			if err != nil {
				f.Close()
				return nil, err
			}
			req.ContentLength = fi.Size()
			if req.ContentLength == 0 {
				req.Body = http.NoBody
				f.Close()
			}
			ctype := "application/yaml"
			if resource.FormatOf(named) == resource.JSON {
				ctype = "application/json"
			}
			req.Header.Set("Content-Type", ctype)
			return req, nil
		}
		f.Close()
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeParts(mw, paths, named)) }()
	req, err := ac.request(http.MethodPost, "/v1/apply?"+q.Encode(), pr)
	if err != nil {
		pr.Close()
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return req, nil
}

var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// writeParts writes each file as a part named by its path. The file the
// user named is read whatever it is (a pipe such as bash's <(...) too);
// those found in a directory only if they are regular files.
func writeParts(mw *multipart.Writer, paths []string, named string) error {
	for _, f := range paths {
		var (
			r   io.ReadCloser
			err error
		)
		switch {
		case f == "-":
			r = io.NopCloser(os.Stdin)
		case f == named:
			r, err = os.Open(f)
		default:
			r, err = files.Open(f)
		}
		if err != nil {
			return err
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, quoteEscaper.Replace(f), quoteEscaper.Replace(filepath.Base(f))))
		ctype := "application/yaml"
		if resource.FormatOf(f) == resource.JSON {
			ctype = "application/json"
		}
		h.Set("Content-Type", ctype)
		w, err := mw.CreatePart(h)
		if err == nil {
			_, err = io.Copy(w, r)
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return mw.Close()
}

// maxListed bounds the variants an apply lists one by one; past it, they
// are counted (GET /v1/resources lists them all).
const maxListed = 100

func printResult(w io.Writer, res admin.ApplyResult) {
	changed, deleted := counts(res)
	if changed+deleted == 0 {
		fmt.Fprintf(w, "unchanged at revision %d\n", res.Revision)
		return
	}
	fmt.Fprintf(w, "revision %d: %s changed, %s deleted\n", res.Revision, plural(changed, "variant"), plural(deleted, "variant"))
	listed := 0
	for _, l := range []struct {
		verb string
		keys []string
	}{{"changed", res.Changed}, {"deleted", res.Deleted}} {
		for _, k := range l.keys {
			if listed++; listed > maxListed {
				break
			}
			fmt.Fprintf(w, "  %s %s\n", l.verb, k)
		}
	}
	if more := changed + deleted - min(listed, maxListed); more > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", more)
	}
}

// counts are how many variants an answer says changed and were deleted:
// its counts, which a server before them did not send (it named them
// all).
func counts(res admin.ApplyResult) (changed, deleted int) {
	return max(res.ChangedCount, len(res.Changed)), max(res.DeletedCount, len(res.Deleted))
}

func runDelete(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
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
	q := url.Values{"type": {typ.URL}, "name": {n}, "list": {strconv.Itoa(maxListed)}}
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
	req, err := ac.request(http.MethodDelete, "/v1/resources?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	var res admin.ApplyResult
	if err := ac.do(httpClient, req, &res); err != nil {
		return err
	}
	printResult(stdout, res)
	return nil
}
