package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// runVersion prints the module version and the VCS revision the binary
// was built from, as the Go toolchain recorded them.
func runVersion(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	pos, err := parse(fs, args, "version", stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q: version takes none", pos[0])
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}

func versionString() string {
	version, rev, at, dirty := "(devel)", "unknown", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := fmt.Sprintf("xdsd %s (revision %s", version, rev)
	if dirty {
		out += ", modified"
	}
	if at != "" {
		out += ", " + at
	}
	return out + ", " + runtime.Version() + ")"
}
