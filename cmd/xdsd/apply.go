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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/internal/fleet"
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
	return fs.String("client", "auto", "check what clients would reject: auto (the connected clients and those --fleet declares, each by its agent), envoy, grpc, or none")
}

// fleetFlag registers --fleet.
func fleetFlag(fs *flag.FlagSet) *string {
	return fs.String("fleet", "", "YAML file declaring clients to check for, connected or not: clients: [{agent: envoy, params: {env: prod}}, {agent: grpc}]")
}

// checker returns the client checker a --client value asks for, for the
// groups of a fleet (nil: none known); nil for none.
func checker(client string, groups []clientcheck.Group) (*clientcheck.Checker, error) {
	if client == "none" {
		return nil, nil
	}
	c, err := clientcheck.ParseRuleSet(client)
	if err != nil {
		return nil, usagef("--client: %v", err)
	}
	return clientcheck.NewFleet(c, groups), nil
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	file := fs.String("f", "", "file, directory or - (standard input) to check")
	client := clientFlag(fs)
	fleetFile := fleetFlag(fs)
	ac := adminFlags(fs, "with --client auto, the admin API of a server whose connected clients to check for (default: none; offline)")
	pos, err := parse(fs, args, "validate [--client auto|envoy|grpc|none] [--fleet FILE] [--admin ADDR] -f FILE|DIR|-", stdout)
	if err != nil {
		return err
	}
	if err := noFileArgs(pos, *file); err != nil {
		return err
	}
	if *file == "" {
		return usagef("-f FILE|DIR|- is required")
	}
	if _, err := checker(*client, nil); err != nil {
		return err
	}
	var groups []clientcheck.Group
	if *fleetFile != "" {
		if groups, err = readFleet(*fleetFile); err != nil {
			return err
		}
	}
	if flagSet(fs, "admin") {
		connected, err := readGroups(ac, stderr)
		if err != nil {
			return err
		}
		groups = append(groups, connected...)
	}
	check, err := checker(*client, groups)
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
			return fmt.Errorf("%d problem(s) %s would reject or wait for in vain%s", n, check.Describe(), narrowHint(check))
		}
		summary += "; " + checkedFor(check)
	}
	fmt.Fprintln(stdout, summary)
	return nil
}

// flagSet reports whether a flag was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// narrowHint tells, when no fleet was known, how to check for the
// clients there are rather than for both rule sets.
func narrowHint(check *clientcheck.Checker) string {
	if check.RuleSet() != clientcheck.Auto || check.Groups() != nil {
		return ""
	}
	return " (no client is connected or declared: Envoy's rules refuse, gRPC's warn; --client grpc checks for gRPC, --fleet FILE or --admin ADDR names the clients)"
}

// readGroups reads the connected clients' groups from a server's admin
// API (GET /v1/groups).
// A replica that did not answer is named on w: its clients are not
// checked for.
func readGroups(ac *adminClient, w io.Writer) ([]clientcheck.Group, error) {
	req, err := ac.request(http.MethodGet, "/v1/groups", nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Groups []struct {
			Agent  string            `json:"agent"`
			Params map[string]string `json:"params"`
			Count  int               `json:"count"`
			Nodes  []string          `json:"sample_nodes"`
		} `json:"groups"`
		Unreachable []fleet.Unreachable `json:"unreachable_replicas"`
	}
	if err := ac.do(httpClient, req, &list); err != nil {
		var ae *answerErr
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			return nil, fmt.Errorf("the server at %s does not list its clients (GET /v1/groups): it is older than this xdsd or serves none; declare the clients with --fleet FILE", ac.addr)
		}
		return nil, err
	}
	for _, u := range list.Unreachable {
		fmt.Fprintf(w, "xdsd validate: warning: replica %s did not answer (%s): its clients are not checked for\n", u.Replica, u.Error)
	}
	out := make([]clientcheck.Group, 0, len(list.Groups))
	for _, g := range list.Groups {
		out = append(out, clientcheck.Group{Agent: g.Agent, Params: g.Params, Count: g.Count, Samples: g.Nodes})
	}
	return out, nil
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
// sets", "checked for 3 client groups (envoy, grpc-go)".
func checkedFor(check *clientcheck.Checker) string {
	var s string
	switch gs := check.Groups(); {
	case check.RuleSet() != clientcheck.Auto:
		s = "checked for " + check.RuleSet().String()
	case gs == nil:
		s = "checked for Envoy, and gRPC as warnings (no client connected or declared)"
	default:
		var agents []string
		for _, g := range gs {
			if !slices.Contains(agents, g.Agent) {
				agents = append(agents, g.Agent)
			}
		}
		s = fmt.Sprintf("checked for %s (%s)", plural(len(gs), "client group"), strings.Join(agents, ", "))
	}
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
	if wh, ok := out.(*withHeader); ok {
		wh.Header, out = resp.Header, wh.Body
	}
	return json.Unmarshal(body, out)
}

// withHeader is an answer whose headers the caller reads too: call
// decodes the body into Body and sets Header.
type withHeader struct {
	Body   any
	Header http.Header
}

// answerErr is an admin API error answer: its status, and its message
// (ErrorBody.Message) as sent.
type answerErr struct {
	status  int
	message string
	text    string // what Error says: the message and every error listed
}

func (e *answerErr) Error() string { return e.text }

// answerError turns an admin API error answer into an error.
func answerError(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("admin API: %s: %w", resp.Status, err)
	}
	var eb admin.ErrorBody
	if json.Unmarshal(body, &eb) != nil || eb.Message == "" {
		return &answerErr{status: resp.StatusCode, text: fmt.Sprintf("admin API: %s: %s", resp.Status, strings.TrimSpace(string(body)))}
	}
	msg := eb.Message
	for _, e := range eb.Errors {
		msg += "\n  " + e.Error()
	}
	return &answerErr{status: resp.StatusCode, message: eb.Message, text: msg}
}

// uploadClient sends applies: a large batch takes a while to send and
// store, so it gets more time than other admin requests.
var uploadClient = &http.Client{Timeout: 30 * time.Minute}

func runApply(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	ac := adminFlags(fs, "admin API of the server")
	file := fs.String("f", "", "file, directory or - (standard input) to apply, as one batch")
	client := clientFlag(fs)
	fleetFile := fleetFlag(fs)
	force := fs.Bool("force", false, "apply even what the client checks say the client would reject")
	dryRun := fs.Bool("dry-run", false, "store nothing: print, for each group of clients, the variants it would newly get, lose and keep, and what would refuse the batch (exit status as apply's)")
	wait := fs.Bool("wait", false, "after the batch commits, wait until every client it concerns has ACKed or NACKed it (exit 3 if any NACKed, 4 on timeout; with --canary, until the server promotes or aborts it, 6 if a person aborted it with xdsd rollout abort and none NACKed)")
	waitTimeout := fs.Duration("wait-timeout", 60*time.Second, "how long --wait waits")
	timing := fs.Bool("timing", false, "print where the apply's time went on standard error: this command's steps, and the server's (its Server-Timing answer: decode, checks, guard, commit, served)")
	cf := addCanaryFlags(fs)
	pos, err := parse(fs, args, "apply [--admin ADDR] [--client auto|envoy|grpc|none] [--fleet FILE] [--force] [--dry-run] [--canary SPEC [--bake 5m]] [--wait [--wait-timeout 60s] [--rollback-on-nack]] -f FILE|DIR|-", stdout)
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
	if *dryRun && *wait {
		return usagef("--dry-run stores nothing, so there is no rollout for --wait to wait for")
	}
	if _, err := checker(*client, nil); err != nil {
		return err
	}
	q := url.Values{"client": {*client}, "list": {strconv.Itoa(maxListed)}}
	if err := cf.check(q, *wait, *waitTimeout); err != nil {
		return err
	}
	if *dryRun && *cf.spec != "" {
		return usagef("--dry-run stores nothing, so there is nothing to stage for --canary (a dry run shows what every group would get)")
	}
	if *fleetFile != "" {
		if *client == "none" {
			return usagef("--fleet declares clients for the client checks, which --client none turns off")
		}
		groups, err := readFleet(*fleetFile)
		if err != nil {
			return err
		}
		q.Set("fleet", fleetParam(groups))
	}
	if *force {
		q.Set("force", "true")
	}
	if *dryRun {
		q.Set("dry_run", "true")
	}
	paths := []string{"-"}
	if *file != "-" {
		if paths, err = files.List(*file); err != nil {
			return err
		}
	}
	// A server older than --client auto refuses client=auto before it
	// reads the batch; one older than --dry-run would apply it. Standard
	// input cannot be sent twice, and a dry run must not reach a server
	// that would apply it: those ask first, with an empty dry run.
	if (*client == "auto" && *file == "-") || (*dryRun && *client != "auto") {
		old, err := olderThanAuto(ac)
		if err != nil {
			return err
		}
		switch {
		case old && *dryRun:
			return fmt.Errorf("the server at %s is older than --dry-run (it refuses client=auto): nothing was sent", ac.addr)
		case old:
			fallBack(q, *fleetFile, stderr)
		}
	}
	var tt *applyTiming
	send := func() ([]byte, error) {
		req, err := applyRequest(ac, q, paths, *file)
		if err != nil {
			return nil, err
		}
		if *timing {
			tt = &applyTiming{}
			req = tt.trace(req)
		}
		var raw json.RawMessage
		ans := &withHeader{Body: &raw}
		err = ac.do(uploadClient, req, ans)
		req.Body.Close() // stops the writer if the server answered early
		if tt != nil {
			tt.done(ans.Header)
		}
		return raw, err
	}
	raw, err := send()
	if tt != nil {
		// tt read at return, not now: a fallback below sends again, and
		// the timing is that of the request which was answered.
		defer func() { tt.print(stderr) }()
	}
	if err != nil && refusesAuto(err) && q.Get("client") == "auto" {
		if *dryRun {
			return fmt.Errorf("the server at %s is older than --dry-run (it refuses client=auto): nothing was sent", ac.addr)
		}
		fallBack(q, *fleetFile, stderr)
		raw, err = send()
	}
	if err != nil {
		return err
	}
	if *dryRun {
		return printDryRun(stdout, stderr, raw)
	}
	var res admin.ApplyResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	for _, f := range res.Findings {
		fmt.Fprintln(stderr, f.Error())
	}
	printResult(stdout, res)
	changed, deleted := counts(res)
	if *cf.spec != "" && changed+deleted > 0 {
		fmt.Fprintf(stdout, "revision %d is staged: only clients in the canary %s get it", res.Revision, q.Get("canary"))
		if *cf.bake > 0 {
			fmt.Fprintf(stdout, "; the server promotes it after %v if a canary client ACKs it and none NACKs it", *cf.bake)
		}
		fmt.Fprintf(stdout, " (xdsd rollout promote|abort %d)\n", res.Revision)
	}
	if !*wait {
		return nil
	}
	if changed+deleted == 0 {
		fmt.Fprintln(stdout, "nothing changed: no rollout to wait for")
		return nil
	}
	if *cf.spec != "" {
		return waitStaged(ac, res.Revision, *waitTimeout, stdout)
	}
	err = waitRollout(ac, res.Revision, *waitTimeout, stdout)
	var ee exitError
	if *cf.rollbackOnNack && errors.As(err, &ee) && ee.code == exitNacked {
		return rollbackOnNack(ac, res.Revision, err, stdout)
	}
	return err
}

// fleetParam is the fleet= parameter that declares groups to the server.
func fleetParam(groups []clientcheck.Group) string {
	type decl struct {
		Agent  string            `json:"agent"`
		Params map[string]string `json:"params,omitempty"`
	}
	ds := make([]decl, len(groups))
	for i, g := range groups {
		ds[i] = decl{g.Agent, g.Params}
	}
	b, _ := json.Marshal(ds) // strings and maps of strings always encode
	return string(b)
}

// refusesAuto reports whether an apply's error is a server older than
// client=auto refusing it ("client=auto: unknown client \"auto\": want
// envoy or grpc"), before it read anything.
func refusesAuto(err error) bool {
	var ae *answerErr
	return errors.As(err, &ae) && ae.status == http.StatusBadRequest && strings.HasPrefix(ae.message, `client=auto: unknown client "auto"`)
}

// fallBack turns an apply for a server older than client=auto into what
// xdsd apply sent before it, --client envoy, and says so.
func fallBack(q url.Values, fleetFile string, stderr io.Writer) {
	fmt.Fprintln(stderr, "xdsd apply: the server is older than --client auto (it refused client=auto): checking for Envoy, as xdsd apply did before; pass --client grpc to check for gRPC instead")
	if fleetFile != "" {
		fmt.Fprintf(stderr, "xdsd apply: that server does not take declared clients: %s is not used\n", fleetFile)
	}
	q.Set("client", string(clientcheck.Envoy))
	q.Del("fleet")
}

// olderThanAuto asks a server whether it takes client=auto, with an empty
// dry run: a server that does answers it (storing nothing, checking
// nothing); one older refuses client=auto before it reads the body, and
// so stores nothing either.
func olderThanAuto(ac *adminClient) (bool, error) {
	req, err := ac.request(http.MethodPost, "/v1/apply?client=auto&dry_run=true", http.NoBody)
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/yaml")
	var res admin.DryRunResult
	err = ac.do(httpClient, req, &res)
	switch {
	case refusesAuto(err):
		return true, nil
	case err != nil:
		return false, err
	case !res.DryRun:
		return false, fmt.Errorf("the server at %s answered a dry run as an apply: refusing to go on", ac.addr)
	}
	return false, nil
}

// printDryRun prints a dry run's answer: each group's plan, the findings,
// and the refusal, which is the error (exit 1) as apply's would be.
func printDryRun(stdout, stderr io.Writer, raw []byte) error {
	var res admin.DryRunResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	if !res.DryRun {
		// A server that does not know dry_run applied the batch.
		return fmt.Errorf("the server did not answer as a dry run: it is older than --dry-run and may have applied the batch; check xdsd history")
	}
	fmt.Fprintf(stdout, "dry run against revision %d: %s; nothing was stored\n", res.Revision, plural(res.Documents, "variant"))
	switch {
	case !res.Checked:
		fmt.Fprintln(stdout, "no client checks (--client none): no groups to show")
	case len(res.Groups) == 0:
		fmt.Fprintln(stdout, "no client is connected or declared (--fleet FILE declares some)")
	}
	for _, g := range res.Groups {
		who := fmt.Sprintf("%d connected", g.Count)
		if g.Count == 0 {
			who = "declared"
		} else if g.Declared {
			who += ", declared"
		}
		params := "no parameters"
		if len(g.Params) > 0 {
			params = constraint.Params(g.Params).String()
		}
		fmt.Fprintf(stdout, "group %s %s (%s)", g.Agent, params, who)
		if len(g.Samples) > 0 {
			fmt.Fprintf(stdout, " e.g. %s", strings.Join(g.Samples, ", "))
		}
		fmt.Fprintln(stdout)
		for _, l := range []struct {
			verb  string
			names []string
			n     int
		}{{"gets", g.Get, g.GetCount}, {"loses", g.Lose, g.LoseCount}, {"keeps", g.Keep, g.KeepCount}} {
			for _, n := range l.names {
				fmt.Fprintf(stdout, "  %s %s\n", l.verb, n)
			}
			if more := l.n - len(l.names); more > 0 {
				fmt.Fprintf(stdout, "  %s %d more\n", l.verb, more)
			}
		}
		for _, r := range g.Refusals {
			fmt.Fprintf(stdout, "  refuses: %s\n", r)
		}
	}
	for _, f := range res.Findings {
		fmt.Fprintln(stderr, f.Error())
	}
	if res.Refused != "" {
		return errors.New(res.Refused)
	}
	fmt.Fprintln(stdout, "the apply would go ahead")
	return nil
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
