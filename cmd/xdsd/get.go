package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/xdsd/xdsd/admin"
	"github.com/xdsd/xdsd/client"
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
	server, bootstrap, nodeID, output string
	delta                             bool
	deltaSet                          bool
	params                            paramFlags
	timeout                           time.Duration
}

func getFlagSet(cmd string) (*flag.FlagSet, *getFlags) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	f := &getFlags{params: paramFlags{}}
	fs.StringVar(&f.server, "server", "127.0.0.1:18000", "xDS server address (ignored with --bootstrap)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "gRPC xDS bootstrap file (federation, dynamic parameters, several servers)")
	fs.BoolVar(&f.delta, "delta", false, "use delta xDS (on-demand VHDS and glob collections always do)")
	fs.Var(f.params, "param", "a TP2 dynamic parameter key=value (repeatable): the variant a client with these parameters gets")
	fs.StringVar(&f.nodeID, "node-id", "", "node id to present (default xdsd-"+cmd+")")
	fs.StringVar(&f.output, "o", "yaml", "output format: yaml or json")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, "how long to wait for a resource before saying it does not exist")
	return fs, f
}

// clientBootstrap builds the bootstrap get and watch use: the file given,
// or one for --server; --param and --delta override it; every authority the
// names use is mapped (to the top-level servers unless the file says more).
func clientBootstrap(f *getFlags, typ *resource.Type, names []string) (*client.Bootstrap, error) {
	doc := map[string]any{}
	if f.bootstrap != "" {
		data, err := os.ReadFile(f.bootstrap)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("bootstrap %s: %v", f.bootstrap, err)
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
			id = "xdsd-cli"
		}
		node["id"] = id
	}
	doc["node"] = node
	delta := f.delta
	if typ.URL == resource.VirtualHostURL {
		delta = true
	}
	for _, n := range names {
		if u, err := name.Parse(n); err == nil && u.Glob {
			delta = true
		}
	}
	if servers, ok := doc["xds_servers"].([]any); ok && (delta || f.deltaSet || f.bootstrap == "") {
		for _, s := range servers {
			if m, ok := s.(map[string]any); ok {
				if delta {
					m["transport"] = "delta"
				} else {
					m["transport"] = "sotw"
				}
			}
		}
	}
	auths, _ := doc["authorities"].(map[string]any)
	if auths == nil {
		auths = map[string]any{}
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
	Status string   `json:"status,omitempty"` // does-not-exist
}

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
		r.Status = "does-not-exist"
	case client.Errored:
		r.Error = e.Err.Error()
	}
	return r
}

func printResults(w io.Writer, format string, rs []Result, stream bool) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
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
			js, err := json.Marshal(r)
			if err != nil {
				return err
			}
			y, err := yaml.JSONToYAML(js)
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
	fs.Visit(func(fl *flag.Flag) { f.deltaSet = f.deltaSet || fl.Name == "delta" })
	if len(pos) < 2 {
		return nil, nil, nil, usagef("want TYPE NAME...")
	}
	if f.output != "yaml" && f.output != "json" {
		return nil, nil, nil, usagef("-o %q: want yaml or json", f.output)
	}
	typ, err := resource.Lookup(pos[0])
	if err != nil {
		return nil, nil, nil, usagef("%v", err)
	}
	return f, typ, pos[1:], nil
}

func startClient(f *getFlags, typ *resource.Type, names []string, stderr io.Writer) (*client.Client, error) {
	b, err := clientBootstrap(f, typ, names)
	if err != nil {
		return nil, err
	}
	return client.New(b, client.Options{DoesNotExistTimeout: f.timeout, Logger: newQuietLogger(stderr)})
}

// runGet prints what a client with the given parameters gets: each resource
// with its name, version and constraints, or why not. It exits 1 when any
// name could not be had.
func runGet(args []string, stdout, stderr io.Writer) error {
	f, typ, names, err := parseGet("get", args, stdout)
	if err != nil {
		return err
	}
	c, err := startClient(f, typ, names, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		mu      sync.Mutex
		results = map[string][]Result{}
		done    = map[string]bool{}
		all     = make(chan struct{})
		last    = time.Now()
	)
	finished := func() bool {
		for _, n := range names {
			if !done[n] {
				return false
			}
		}
		return true
	}
	for _, n := range names {
		multi := n == "*" || strings.HasSuffix(strings.SplitN(n, "?", 2)[0], "/*")
		cancel, err := c.Watch(typ.URL, n, func(e client.Event) {
			mu.Lock()
			defer mu.Unlock()
			results[n] = append(results[n], render(e, typ))
			if !multi {
				done[n] = true
			}
			last = time.Now()
			if finished() {
				select {
				case <-all:
				default:
					close(all)
				}
			}
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
				for range t.C {
					mu.Lock()
					settled := len(results[n]) > 0 && time.Since(last) > 200*time.Millisecond
					if settled || time.Now().After(deadline) {
						done[n] = true
						if finished() {
							select {
							case <-all:
							default:
								close(all)
							}
						}
						mu.Unlock()
						return
					}
					mu.Unlock()
				}
			}()
		}
	}
	select {
	case <-all:
	case <-time.After(f.timeout + 5*time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	var out []Result
	failed := false
	for _, n := range names {
		rs := results[n]
		if len(rs) == 0 {
			rs = []Result{{Resource: admin.Resource{Type: typ.Name, Name: n}, Status: "does-not-exist"}}
		}
		for i := range rs {
			rs[i].Event = ""
			if rs[i].Status != "" || rs[i].Error != "" {
				failed = true
			}
		}
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
		out = append(out, rs...)
	}
	if err := printResults(stdout, f.output, out, false); err != nil {
		return err
	}
	if failed {
		return errors.New("not every resource could be had")
	}
	return nil
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
	return watch(ctx, f, typ, names, stdout, stderr)
}

func watch(ctx context.Context, f *getFlags, typ *resource.Type, names []string, stdout, stderr io.Writer) error {
	c, err := startClient(f, typ, names, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	var mu sync.Mutex
	for _, n := range names {
		cancel, err := c.Watch(typ.URL, n, func(e client.Event) {
			r := render(e, typ)
			r.Time = time.Now().UTC().Format(time.RFC3339Nano)
			mu.Lock()
			defer mu.Unlock()
			printResults(stdout, f.output, []Result{r}, true)
		})
		if err != nil {
			return usagef("%s: %v", n, err)
		}
		defer cancel()
	}
	<-ctx.Done()
	return nil
}

// newQuietLogger logs the client's warnings (NACKs, lost streams) only.
func newQuietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
