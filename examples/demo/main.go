// Command demo shows TP2 end to end in one command: it serves
// examples/tp2-variants from an in-process xdsd server, starts the four
// backends the example's clusters route to (small gRPC servers that answer
// with their own name), and for each of four clients — unmodified grpc-go
// xDS clients that differ only in their node metadata — prints which
// backend answered:
//
//	go run ./examples/demo
//
//	env=prod version=v1 → tp2-prod-v1
//	env=prod version=v2 → tp2-prod
//	env=test version=v1 → tp2-v1
//	env=test version=v2 → tp2-default
//
// The server picks each client's variant of route configuration "tp2" from
// the string fields of its node metadata (TP2 "Migrating From Node
// Metadata"), so the clients need no TP2 support of their own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

func main() {
	examples := flag.String("examples", defaultExamples(), "the examples/tp2-variants directory")
	timeout := flag.Duration("timeout", 30*time.Second, "how long each client may take to get its answer")
	flag.Parse()
	rows, err := run(context.Background(), *examples, *timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, r := range rows {
		fmt.Println(r)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// defaultExamples finds examples/tp2-variants beside this program's source
// (go run ./examples/demo from the repository) or in the working
// directory.
func defaultExamples() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Join(filepath.Dir(file), "..", "tp2-variants")
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	return filepath.Join("examples", "tp2-variants")
}

// A client of the demo: its node metadata, and the backend it should reach.
type client struct {
	env, version, want string
}

var clients = []client{
	{"prod", "v1", "tp2-prod-v1"},
	{"prod", "v2", "tp2-prod"},
	{"test", "v1", "tp2-v1"},
	{"test", "v2", "tp2-default"},
}

// run serves the example, starts the backends and the clients, and returns
// one line per client. It fails when a client did not reach the backend its
// variant routes to.
func run(ctx context.Context, examples string, timeout time.Duration, log *slog.Logger) ([]string, error) {
	backends, stopBackends, err := startBackends([]string{"tp2-default", "tp2-prod", "tp2-v1", "tp2-prod-v1"})
	if err != nil {
		return nil, err
	}
	defer stopBackends()
	xdsAddr, stopServer, err := serve(ctx, examples, backends, log)
	if err != nil {
		return nil, err
	}
	defer stopServer()
	var rows []string
	var errs []error
	for _, c := range clients {
		got, err := ask(ctx, xdsAddr, c, timeout)
		line := fmt.Sprintf("env=%s version=%s → %s", c.env, c.version, got)
		if err != nil {
			line = fmt.Sprintf("env=%s version=%s → error: %v", c.env, c.version, err)
			errs = append(errs, err)
		} else if got != c.want {
			errs = append(errs, fmt.Errorf("env=%s version=%s reached %s, want %s", c.env, c.version, got, c.want))
		}
		rows = append(rows, line)
	}
	return rows, errors.Join(errs...)
}

// freePort asks the kernel for a free loopback port.
func freePort() (net.Listener, int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	return lis, lis.Addr().(*net.TCPAddr).Port, nil
}
