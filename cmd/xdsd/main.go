package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xdsd/xdsd/internal/suggest"
	"github.com/xdsd/xdsd/internal/tuning/initgc"
)

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "serve resources from a store over xDS, with an admin API", runServe},
		{"relay", "a caching xDS proxy in front of one or more servers", runRelay},
		{"apply", "apply resource files to a running server, as one atomic batch", runApply},
		{"delete", "delete a resource, or one variant of it, from a running server", runDelete},
		{"validate", "check resource files offline, and what a client would reject; nothing is stored", runValidate},
		{"import", "turn an Envoy bootstrap's static resources into resource files", runImport},
		{"get", "print what a client with given parameters gets from a server", runGet},
		{"watch", "print every update a client with given parameters gets, until interrupted", runWatch},
		{"status", "for each connected client, what it ACKed or NACKed, per type, with a summary", runStatus},
		{"history", "the revisions of the store, newest first: when, who, what changed", runHistory},
		{"diff", "what changed between two revisions, variant by variant, as a diff of the YAML", runDiff},
		{"rollback", "restore the state of an earlier revision, as a new revision", runRollback},
		{"rollout", "promote or abort a staged revision (apply --canary): rollout promote|abort REV", runRollout},
		{"backup", "write a consistent, verified copy of a running server's store to a file", runBackup},
		{"restore", "replace a stopped server's store with a backup (offline)", runRestore},
		{"version", "print the version and VCS revision xdsd was built from", runVersion},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: xdsd <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'xdsd help <command>' (or 'xdsd <command> -h') for a command's flags.")
}

// The collector was off while the packages initialised (internal/tuning/initgc):
// this init runs after every package main imports.
func init() { initgc.Restore() }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	if len(args) >= 2 && args[0] == "help" {
		// xdsd help CMD is xdsd CMD -h.
		return run([]string{args[1], "-h"}, stdout, stderr)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		var ue usageError
		var ee exitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			fmt.Fprintf(stderr, "xdsd %s: %v\n", c.name, err)
			return ee.code
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "xdsd %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "xdsd %s: %v\n", c.name, err)
			return 1
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	fmt.Fprintf(stderr, "xdsd: unknown command %q%s\n\n", args[0], didYouMean(args[0], names))
	usage(stderr)
	return 2
}

// didYouMean suggests the candidate closest to a mistyped word, if one is
// close enough to be what was meant: ` (did you mean "serve"?)`, or "".
func didYouMean(typed string, candidates []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, c := range candidates {
		d := suggest.Distance(strings.ToLower(typed), c, 3)
		if strings.HasPrefix(c, typed) && len(typed) >= 2 {
			d = 1
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// parse parses flags that may come before, between or after positional
// arguments (xdsd delete rds main --constraints env=prod); on -h it prints
// the synopsis and the flags to stdout.
func parse(fs *flag.FlagSet, args []string, synopsis string, stdout io.Writer) (pos []string, err error) {
	defer func() {
		if errors.Is(err, flag.ErrHelp) {
			helpFlags(fs, synopsis, stdout)
		}
	}()
	fs.SetOutput(io.Discard)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usagef("%v%s", err, flagHint(fs, args))
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagHint suggests the flag that an undefined flag in args, which fs
// failed to parse, probably meant, and points at -h. It finds the flag by
// looking the arguments up in fs, as fs.Parse reads them, not by reading
// the flag package's error text.
func flagHint(fs *flag.FlagSet, args []string) string {
	typed, ok := undefinedFlag(fs, args)
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if hint := didYouMean(typed, names); hint != "" {
		return strings.Replace(hint, `"`, `"--`, 1)
	}
	return fmt.Sprintf(" (xdsd %s -h lists the flags)", fs.Name())
}

// undefinedFlag returns the name of the first flag in args that fs does
// not define, reading args as fs.Parse does: flags up to the first
// argument that is not one (or "--"), a flag that is not boolean taking
// the next argument as its value unless written -name=value.
func undefinedFlag(fs *flag.FlagSet, args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return "", false
		}
		name := strings.TrimPrefix(a[1:], "-")
		name, _, hasValue := strings.Cut(name, "=")
		if name == "" || name[0] == '-' || name[0] == '=' {
			return "", false // a malformed flag, which fs names itself
		}
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				return "", false
			}
			return name, true
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); (!ok || !b.IsBoolFlag()) && !hasValue {
			i++ // its value
		}
	}
	return "", false
}

// noArgs is the usage error of a command that takes no positional
// arguments, when some were given.
func noArgs(pos []string) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q: this command takes flags only", pos[0])
	}
	return nil
}

// helpFlags prints a flag set's usage when -h is given.
func helpFlags(fs *flag.FlagSet, synopsis string, w io.Writer) {
	fmt.Fprintf(w, "usage: xdsd %s\n", synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func plural(n int, s string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", s)
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(s, "s"))
}
