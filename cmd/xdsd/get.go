package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// paramFlags collects repeated --param k=v.
type paramFlags map[string]string

func (p paramFlags) String() string { return fmt.Sprint(map[string]string(p)) }
func (p paramFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[k] = v
	return nil
}

type getFlags struct {
	cmd                               string // get or watch
	server, bootstrap, nodeID, output string
	serverSet                         bool
	delta                             bool
	deltaSet                          bool
	follow                            bool
	params                            paramFlags
	computed                          paramFlags // xds.resource.* attributes added to the names
	timeout                           time.Duration
}

func getFlagSet(cmd string) (*flag.FlagSet, *getFlags) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	f := &getFlags{cmd: cmd, params: paramFlags{}, computed: paramFlags{}}
	fs.StringVar(&f.server, "server", "127.0.0.1:18000", "xDS server address (not with --bootstrap)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "gRPC xDS bootstrap file (federation, dynamic parameters, several servers); "+
		"without it and --server, the bootstrap named by $GRPC_XDS_BOOTSTRAP, or given in $GRPC_XDS_BOOTSTRAP_CONFIG, is used when set")
	fs.BoolVar(&f.delta, "delta", false, "use delta xDS, or (--delta=false) SotW; default SotW, or with a bootstrap each server's \"transport\" "+
		"(on-demand VHDS and glob collections always use delta)")
	fs.Var(f.params, "param", "a TP2 dynamic parameter key=value (repeatable): the variant a client with these parameters gets")
	fs.Var(f.computed, "computed", "a computed attribute key=value (repeatable), added to each xdstp:// name as the context parameter "+
		"xds.resource.key=value, as a client does for an on-demand listener by VIP (TP1)")
	fs.StringVar(&f.nodeID, "node-id", "", "node id to present (default: the bootstrap's, else xdsd-"+cmd+")")
	fs.StringVar(&f.output, "o", "yaml", "output format: yaml or json")
	timeoutHelp := "how long to wait for an answer, a positive duration: a name the server has not answered by then is printed " +
		"with status no-answer; a server that refuses or cannot be reached fails get within about a second, naming it"
	if cmd == "watch" {
		timeoutHelp = "how long a subscribed name may go unanswered on a connected stream before it is printed as does-not-exist; " +
			"while the server cannot be reached, watch says so on stderr every few seconds and keeps retrying"
	}
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, timeoutHelp)
	followHelp := "follow references as a client does (listener → routes → clusters → endpoints, secrets, " +
		"extension configs, across authorities) and print the whole chain as one document; a dangling reference fails get"
	if cmd == "watch" {
		followHelp = "follow references as a client does, and print the whole chain as one document at start and whenever any part of it changes"
	}
	fs.BoolVar(&f.follow, "follow", false, followHelp)
	return fs, f
}

// The environment variables gRPC reads its bootstrap from (docs/architecture.md §4.4;
// the file wins when both are set, as in gRPC).
const (
	envBootstrapFile   = "GRPC_XDS_BOOTSTRAP"
	envBootstrapConfig = "GRPC_XDS_BOOTSTRAP_CONFIG"
)

// bootstrapJSON reads the bootstrap get and watch start from: the file
// given, else (with no --server) the environment's, else none.
func bootstrapJSON(f *getFlags) (data []byte, from string, err error) {
	switch {
	case f.bootstrap != "":
		data, err = os.ReadFile(f.bootstrap)
		return data, f.bootstrap, err
	case f.serverSet:
		return nil, "", nil
	case os.Getenv(envBootstrapFile) != "":
		path := os.Getenv(envBootstrapFile)
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", envBootstrapFile, err)
		}
		return data, path, nil
	case os.Getenv(envBootstrapConfig) != "":
		return []byte(os.Getenv(envBootstrapConfig)), envBootstrapConfig, nil
	}
	return nil, "", nil
}

// clientBootstrap builds the bootstrap get and watch use: the file given
// (or the environment's), or one for --server; --param and --delta
// override it; every authority the names use is mapped (to the top-level
// servers unless the file says more).
func clientBootstrap(f *getFlags, typ *resource.Type, names []string) (*client.Bootstrap, error) {
	doc := map[string]any{}
	data, from, err := bootstrapJSON(f)
	if err != nil {
		return nil, err
	}
	if data != nil {
		// Check the bootstrap as given first, so that its errors name it.
		if _, err := client.ParseBootstrapFrom(data, from); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("bootstrap %s: %v", from, err)
		}
	} else {
		doc["xds_servers"] = []any{map[string]any{"server_uri": f.server, "channel_creds": []any{map[string]any{"type": "insecure"}}}}
	}
	node, _ := doc["node"].(map[string]any)
	if node == nil {
		node = map[string]any{}
	}
	if f.nodeID != "" || node["id"] == nil {
		id := f.nodeID
		if id == "" {
			id = "xdsd-" + f.cmd
		}
		node["id"] = id
	}
	doc["node"] = node
	auths, _ := doc["authorities"].(map[string]any)
	if auths == nil {
		auths = map[string]any{}
	}
	// The transport: --delta (or --delta=false) when given; delta for what
	// only delta can fetch; otherwise SotW for --server, and each server's
	// own "transport" in a bootstrap.
	delta, override := f.delta, f.deltaSet || data == nil
	if typ.URL == resource.VirtualHostURL {
		delta, override = true, true
	}
	for _, n := range names {
		if u, err := name.Parse(n); err == nil && u.Glob {
			delta, override = true, true
		}
	}
	if override {
		transport := "sotw"
		if delta {
			transport = "delta"
		}
		setTransport := func(servers any) {
			list, _ := servers.([]any)
			for _, s := range list {
				if m, ok := s.(map[string]any); ok {
					m["transport"] = transport
				}
			}
		}
		setTransport(doc["xds_servers"])
		for _, a := range auths {
			if m, ok := a.(map[string]any); ok {
				setTransport(m["xds_servers"])
			}
		}
	}
	for _, n := range names {
		if u, err := name.Parse(n); err == nil && u.IsXDSTP() {
			if _, ok := auths[u.Authority]; !ok {
				auths[u.Authority] = map[string]any{}
			}
		}
	}
	if len(f.params) > 0 {
		doc["dynamic_parameters"] = map[string]string(f.params)
		for k, a := range auths {
			m, _ := a.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			m["dynamic_parameters"] = map[string]string(f.params)
			auths[k] = m
		}
	}
	doc["authorities"] = auths
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return client.ParseBootstrap(js)
}

// Result is one resource as get and watch print it.
type Result struct {
	Time  string `json:"time,omitempty"`
	Event string `json:"event,omitempty"`
	admin.Resource
	Via    []string `json:"via,omitempty"`
	Status string   `json:"status,omitempty"` // does-not-exist, or (get) no-answer
}

// The statuses of a name that could not be had.
const (
	statusDoesNotExist = "does-not-exist" // the server says so
	statusNoAnswer     = "no-answer"      // get: the server said nothing of it within --timeout
)

func render(e client.Event, typ *resource.Type) Result {
	r := Result{Event: e.Kind.String(), Via: e.Via}
	if e.Variant != nil {
		r.Resource = admin.Render(e.Variant)
	} else {
		r.Resource = admin.Resource{Type: typ.Name}
	}
	r.Resource.Name = e.Name
	switch e.Kind {
	case client.DoesNotExist, client.Removed:
		r.Status = statusDoesNotExist
	case client.Errored:
		r.Error = e.Err.Error()
	}
	return r
}

// sortedJSON is v as JSON with the keys of every object sorted, so that
// YAML output lists fields in one predictable order.
func sortedJSON(v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

func printResults(w io.Writer, format string, rs []Result, stream bool) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		// Route matches and constraints hold "&&", "<", ">": print them.
		enc.SetEscapeHTML(false)
		if stream {
			for _, r := range rs {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			return nil
		}
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	case "yaml":
		for _, r := range rs {
			js, err := sortedJSON(r)
			if err != nil {
				return err
			}
			y, err := resource.JSONToYAML(js)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "---\n%s", y)
		}
		return nil
	}
	return usagef("-o %q: want yaml or json", format)
}

func parseGet(cmd string, args []string, stdout io.Writer) (*getFlags, *resource.Type, []string, error) {
	fs, f := getFlagSet(cmd)
	pos, err := parse(fs, args, cmd+" [--server ADDR | --bootstrap FILE] [--delta] [--param k=v]... [--node-id ID] [-o yaml|json] TYPE NAME...", stdout)
	if err != nil {
		return nil, nil, nil, err
	}
	fs.Visit(func(fl *flag.Flag) {
		f.deltaSet = f.deltaSet || fl.Name == "delta"
		f.serverSet = f.serverSet || fl.Name == "server"
	})
	if len(pos) < 2 {
		return nil, nil, nil, usagef("want TYPE NAME...")
	}
	if f.output != "yaml" && f.output != "json" {
		return nil, nil, nil, usagef("-o %q: want yaml or json", f.output)
	}
	if f.timeout <= 0 {
		return nil, nil, nil, usagef("--timeout %v: want a positive duration", f.timeout)
	}
	if f.serverSet && f.bootstrap != "" {
		return nil, nil, nil, usagef("give at most one of --server ADDR and --bootstrap FILE")
	}
	typ, err := resource.Lookup(pos[0])
	if err != nil {
		return nil, nil, nil, usagef("%v", err)
	}
	return f, typ, pos[1:], nil
}

// startClient starts the client get and watch use. doesNotExist is its
// does-not-exist timeout (negative: none).
func startClient(f *getFlags, typ *resource.Type, names []string, doesNotExist time.Duration, logger *slog.Logger) (*client.Client, error) {
	b, err := clientBootstrap(f, typ, names)
	if err != nil {
		return nil, err
	}
	if err := b.CheckCredentials(); err != nil {
		return nil, err
	}
	return client.New(b, client.Options{DoesNotExistTimeout: doesNotExist, Logger: logger})
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
	r := render(e, typ)
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

// results lists the name's latest state for printing: n's own, a
// collection's members in name order (and its own status), or, when
// nothing was heard, no-answer.
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
		rs = []Result{{Resource: admin.Resource{Type: typ.Name, Name: n}, Status: statusNoAnswer}}
	}
	return rs
}

// runGet prints what a client with the given parameters gets: each name
// requested once, in its latest state when every name has been answered
// (or --timeout passed) — the resource, or why not. It exits 1 when any
// name could not be had in the end (does not exist, rejected, or not
// answered within --timeout), and fails naming the server when one could
// not be reached within --timeout.
func runGet(args []string, stdout, stderr io.Writer) error {
	f, typ, names, err := parseGet("get", args, stdout)
	if err != nil {
		return err
	}
	if f.follow {
		return runFollow(f, typ, names, stdout, stderr)
	}
	// No does-not-exist timer: a name the server has not answered when
	// --timeout passes is reported as unanswered, not as absent (which
	// only the server's word makes it).
	c, err := startClient(f, typ, names, -1, clientLogger(stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		mu     sync.Mutex
		states = map[string]*nameState{}
		done   = map[string]bool{}
		frozen bool // every name is done: later events change nothing printed
		all    = make(chan struct{})
		stop   = make(chan struct{})
		last   = time.Now()
	)
	defer close(stop)
	for _, n := range names {
		if states[n] == nil {
			states[n] = &nameState{}
		}
	}
	ctx := context.Background()
	// finished closes all once every name is done; mu is held.
	finished := func() {
		for _, n := range names {
			if !done[n] {
				return
			}
		}
		frozen = true
		select {
		case <-all:
		default:
			close(all)
		}
	}
	for _, n := range names {
		multi := n == db.Wildcard || db.IsGlob(n)
		st := states[n]
		cancel, err := f.watchName(ctx, c, typ.URL, n, func(e client.Event) {
			mu.Lock()
			defer mu.Unlock()
			if frozen {
				return
			}
			st.note(e, typ, multi)
			if !multi {
				done[n] = true
			}
			last = time.Now()
			finished()
		})
		if err != nil {
			return usagef("%s: %v", n, err)
		}
		defer cancel()
		if multi {
			// A glob or a wildcard has no end; take what the first answer
			// brings (members come in one response).
			go func() {
				t := time.NewTicker(50 * time.Millisecond)
				defer t.Stop()
				deadline := time.Now().Add(f.timeout)
				for {
					select {
					case <-stop:
						return
					case <-t.C:
					}
					mu.Lock()
					settled := st.heard && time.Since(last) > 200*time.Millisecond
					if settled || time.Now().After(deadline) {
						done[n] = true
						finished()
						mu.Unlock()
						return
					}
					mu.Unlock()
				}
			}()
		}
	}
	var unreachable []string  // why names could not be had: their server was not reached
	skip := map[string]bool{} // names not printed: their server was not reached
	deadline := time.NewTimer(f.timeout)
	defer deadline.Stop()
	// A server that refuses connections, or cannot be reached at all, is
	// reported within a second or two, not at --timeout: check every
	// name's server while waiting.
	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	started := time.Now()
wait:
	for {
		select {
		case <-all:
			break wait
		case <-check.C:
			mu.Lock()
			allDown := true
			for _, n := range names {
				if !done[n] && (time.Since(started) < fastFail || !failing(c, n)) {
					allDown = false
				}
			}
			mu.Unlock()
			if !allDown {
				continue
			}
		case <-deadline.C:
		}
		mu.Lock()
		for _, n := range names {
			if done[n] {
				continue
			}
			if why := notReached(c, n, f.timeout); why != "" {
				done[n], skip[n] = true, true
				if !slices.Contains(unreachable, why) {
					unreachable = append(unreachable, why)
				}
			}
		}
		// The rest were asked of a server that was reached and said
		// nothing of them: they are printed as unanswered.
		finished()
		mu.Unlock()
		break
	}
	mu.Lock()
	defer mu.Unlock()
	frozen = true
	var out []Result
	failed := false
	var unanswered []string
	printed := map[string]bool{}
	for _, n := range names {
		if printed[n] || skip[n] {
			continue // asked for twice: printed once; or not reached: said on stderr
		}
		printed[n] = true
		for _, r := range states[n].results(typ, n) {
			if r.Status != "" || r.Error != "" {
				failed = true
			}
			if r.Status == statusNoAnswer {
				unanswered = append(unanswered, r.Name)
			}
			out = append(out, r)
		}
	}
	if len(out) > 0 {
		if err := printResults(stdout, f.output, out, false); err != nil {
			return err
		}
	}
	if len(unreachable) > 0 {
		return errors.New(strings.Join(unreachable, "; "))
	}
	if len(unanswered) > 0 {
		return fmt.Errorf("no answer within --timeout %v for %s", f.timeout, strings.Join(unanswered, ", "))
	}
	if failed {
		return errors.New("not every resource could be had")
	}
	return nil
}

// watchName watches a name given on the command line, with the
// --computed attributes when there are any.
func (f *getFlags) watchName(ctx context.Context, c *client.Client, typeURL, n string, h client.Handler) (client.CancelFunc, error) {
	if len(f.computed) > 0 {
		return c.WatchComputed(ctx, typeURL, n, f.computed, h)
	}
	return c.Watch(ctx, typeURL, n, h)
}

// fastFail is how long get gives a server that fails every connection
// before reporting it, rather than waiting for --timeout.
const fastFail = 1500 * time.Millisecond

// failing reports whether n's server has never been reached and its last
// attempt failed (refused, unreachable, not an xDS server).
func failing(c *client.Client, n string) bool {
	u, err := c.UpstreamFor(n)
	return err != nil || (u.Connected == "" && u.LastError != "")
}

// notReached says why a name's server was not reached, or "" when it was
// (a stream is up, or open and not failing).
func notReached(c *client.Client, n string, timeout time.Duration) string {
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
		if hint := xdsMismatch(srv); hint != "" {
			why += "\n  " + hint
		}
	}
	return fmt.Sprintf("cannot reach %s: %s", servers, why)
}

// runWatch prints every update and removal, with a timestamp, until
// interrupted.
func runWatch(args []string, stdout, stderr io.Writer) error {
	f, typ, names, err := parseGet("watch", args, stdout)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.follow {
		return watchFollow(ctx, f, typ, names, stdout, stderr)
	}
	return watch(ctx, f, typ, names, stdout, stderr)
}

// watch prints events to stdout and the connection's state changes (up,
// lost, failing) to stderr.
func watch(ctx context.Context, f *getFlags, typ *resource.Type, names []string, stdout, stderr io.Writer) error {
	c, err := startClient(f, typ, names, f.timeout, clientLogger(stderr, slog.LevelInfo))
	if err != nil {
		return err
	}
	defer c.Close()
	var mu sync.Mutex
	shown := map[string]*resource.Variant{} // what was last printed as updated, by name
	for _, n := range names {
		cancel, err := f.watchName(ctx, c, typ.URL, n, func(e client.Event) {
			mu.Lock()
			defer mu.Unlock()
			// A SotW response carries every resource of a type: print
			// an update only when this resource (or the variant of it
			// that applies) changed.
			if e.Kind == client.Updated {
				if prev := shown[e.Name]; prev != nil && prev.SameContent(e.Variant) {
					return
				}
				shown[e.Name] = e.Variant
			} else {
				delete(shown, e.Name)
			}
			r := render(e, typ)
			r.Time = time.Now().UTC().Format(time.RFC3339Nano)
			printResults(stdout, f.output, []Result{r}, true)
		})
		if err != nil {
			return usagef("%s: %v", n, err)
		}
		defer cancel()
	}
	reportUnreachable(ctx, c, stderr, 5*time.Second)
	return nil
}

// reportUnreachable says on w, until ctx ends, when an upstream has never
// been reached or is down, and again every interval while it stays so:
// watch keeps retrying, visibly, rather than going quiet after one
// warning.
func reportUnreachable(ctx context.Context, c *client.Client, w io.Writer, interval time.Duration) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := map[string]time.Time{} // servers → when last reported
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, u := range c.Upstreams() {
			key := strings.Join(u.Servers, ", ")
			if u.Connected != "" || u.LastError == "" {
				delete(last, key)
				continue
			}
			if at, ok := last[key]; ok && time.Since(at) < interval {
				continue
			}
			last[key] = time.Now()
			fmt.Fprintf(w, "xdsd watch: cannot reach xDS server %s: %s; retrying (down since %s)\n", key,
				strings.TrimPrefix(u.LastError, key+": "), u.DownSince)
		}
	}
}

// clientLogger logs the client's messages at level and above: connection
// state (info: a stream up; warn: lost, or a server failing) and NACKs.
func clientLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
