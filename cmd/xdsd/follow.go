package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/xdsd/xdsd/internal/inspect"
	"github.com/xdsd/xdsd/resource"
)

// runFollow resolves the chain from each name and prints it as one
// document; a dangling reference (or a name not had) fails it.
func runFollow(f *getFlags, typ *resource.Type, names []string, stdout, stderr io.Writer) error {
	c, err := inspect.StartClient(&f.Config, typ, names, inspect.FollowWait(f.Timeout), clientLogger(stderr, slog.LevelWarn))
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := inspect.Follow(c, typ, names, f.Timeout, xdsMismatch)
	if err != nil {
		if len(ch.Resources) > 0 {
			// What was resolved before the time ran out.
			if perr := printJSONOrYAML(stdout, f.output, ch); perr != nil {
				return perr
			}
		}
		return nameUsage(err)
	}
	if err := printJSONOrYAML(stdout, f.output, ch); err != nil {
		return err
	}
	if len(ch.Dangling) > 0 {
		return fmt.Errorf("%s: %s", plural(len(ch.Dangling), "dangling reference"), strings.Join(ch.Dangling, "; "))
	}
	return nil
}

// watchFollow prints the chain, with a timestamp, at start and whenever
// it changes, until ctx ends.
func watchFollow(ctx context.Context, f *getFlags, typ *resource.Type, names []string, stdout, stderr io.Writer) error {
	c, err := inspect.StartClient(&f.Config, typ, names, f.Timeout, clientLogger(stderr, slog.LevelInfo))
	if err != nil {
		return err
	}
	defer c.Close()
	go inspect.ReportUnreachable(ctx, c, stderr, inspect.UnreachableInterval)
	return nameUsage(inspect.WatchChain(ctx, c, typ, names, func(ch inspect.Chain) error {
		fmt.Fprintln(stdout, "---")
		return printJSONOrYAML(stdout, f.output, ch)
	}))
}
