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
	"strings"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/internal/inspect"
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

// getFlags are get's and watch's flags: the client they run as, and how
// they print.
type getFlags struct {
	inspect.Config
	output string
	follow bool
}

func getFlagSet(cmd string) (*flag.FlagSet, *getFlags) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	params, computed := paramFlags{}, paramFlags{}
	f := &getFlags{Config: inspect.Config{Cmd: cmd, Params: params, Computed: computed}}
	fs.StringVar(&f.Server, "server", "127.0.0.1:18000", "xDS server address (not with --bootstrap)")
	fs.StringVar(&f.Bootstrap, "bootstrap", "", "gRPC xDS bootstrap file (federation, dynamic parameters, several servers); "+
		"without it and --server, the bootstrap named by $"+inspect.EnvBootstrapFile+", or given in $"+inspect.EnvBootstrapConfig+", is used when set")
	fs.BoolVar(&f.Delta, "delta", false, "use delta xDS, or (--delta=false) SotW; default SotW, or with a bootstrap each server's \"transport\" "+
		"(on-demand VHDS and glob collections always use delta)")
	fs.Var(params, "param", "a TP2 dynamic parameter key=value (repeatable): the variant a client with these parameters gets")
	fs.Var(computed, "computed", "a computed attribute key=value (repeatable), added to each xdstp:// name as the context parameter "+
		"xds.resource.key=value, as a client does for an on-demand listener by VIP (TP1)")
	fs.StringVar(&f.NodeID, "node-id", "", "node id to present (default: the bootstrap's, else xdsd-"+cmd+")")
	fs.StringVar(&f.output, "o", "yaml", "output format: yaml or json")
	timeoutHelp := "how long to wait for an answer, a positive duration: a name the server has not answered by then is printed " +
		"with status no-answer; a server that refuses or cannot be reached fails get within about a second, naming it"
	if cmd == "watch" {
		timeoutHelp = "how long a subscribed name may go unanswered on a connected stream before it is printed as does-not-exist; " +
			"while the server cannot be reached, watch says so on stderr every few seconds and keeps retrying"
	}
	fs.DurationVar(&f.Timeout, "timeout", 15*time.Second, timeoutHelp)
	followHelp := "follow references as a client does (listener → routes → clusters → endpoints, secrets, " +
		"extension configs, across authorities) and print the whole chain as one document; a dangling reference fails get"
	if cmd == "watch" {
		followHelp = "follow references as a client does, and print the whole chain as one document at start and whenever any part of it changes"
	}
	fs.BoolVar(&f.follow, "follow", false, followHelp)
	return fs, f
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

func printResults(w io.Writer, format string, rs []inspect.Result, stream bool) error {
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
		f.DeltaSet = f.DeltaSet || fl.Name == "delta"
		f.ServerSet = f.ServerSet || fl.Name == "server"
	})
	if len(pos) < 2 {
		return nil, nil, nil, usagef("want TYPE NAME...")
	}
	if f.output != "yaml" && f.output != "json" {
		return nil, nil, nil, usagef("-o %q: want yaml or json", f.output)
	}
	if f.Timeout <= 0 {
		return nil, nil, nil, usagef("--timeout %v: want a positive duration", f.Timeout)
	}
	if f.ServerSet && f.Bootstrap != "" {
		return nil, nil, nil, usagef("give at most one of --server ADDR and --bootstrap FILE")
	}
	typ, err := resource.Lookup(pos[0])
	if err != nil {
		return nil, nil, nil, usagef("%v", err)
	}
	return f, typ, pos[1:], nil
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
	c, err := inspect.StartClient(&f.Config, typ, names, -1, clientLogger(stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	a, err := inspect.Get(c, f.Computed, typ, names, f.Timeout, xdsMismatch)
	if err != nil {
		return nameUsage(err)
	}
	if len(a.Results) > 0 {
		if err := printResults(stdout, f.output, a.Results, false); err != nil {
			return err
		}
	}
	return a.Err()
}

// nameUsage makes a name the client refused a usage error (exit 2).
func nameUsage(err error) error {
	var ne *inspect.NameError
	if errors.As(err, &ne) {
		return usagef("%s: %v", ne.Name, ne.Err)
	}
	return err
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
	c, err := inspect.StartClient(&f.Config, typ, names, f.Timeout, clientLogger(stderr, slog.LevelInfo))
	if err != nil {
		return err
	}
	defer c.Close()
	emit := func(r inspect.Result) { printResults(stdout, f.output, []inspect.Result{r}, true) }
	return nameUsage(inspect.Watch(ctx, c, f.Computed, typ, names, emit, stderr))
}

// clientLogger logs the client's messages at level and above: connection
// state (info: a stream up; warn: lost, or a server failing) and NACKs.
func clientLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
