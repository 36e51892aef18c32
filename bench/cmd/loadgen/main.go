// Command loadgen is the benchmark's load generator: it reads
// control.Command JSON lines on stdin, opens and ACKs ADS streams against
// the server under test, and writes control.Event JSON lines on stdout.
// Logs go to stderr, and at exit a line with the process's own CPU time.
// LOADGEN_CPUPROFILE=file writes a CPU profile.
//
//	loadgen < commands > events
//
// See bench/control for the protocol. Responses are never unmarshaled: the
// gRPC codec hands over raw bytes, and only the version, nonce and (until a
// stream is connected) resource names are read, with protowire. One
// goroutine per stream receives and ACKs; per-stream state is aggregated
// only when an event is due.
//
// A connect replaces the streams of the previous one. An expect ends the
// previous expect early (it reports what it has). Because the driver makes
// its change right after writing the expect, a stream may get the marker
// before the expect is read: while no expect is active, streams note the
// first time they see each new control.MarkerFormat round, and the expect
// counts those noted at or after T0.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/bench/rlimit"
)

func main() {
	if err := rlimit.RaiseNoFile(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: raising the open-file limit:", err)
	}
	if os.Getenv("GOGC") == "" {
		// Memory is plentiful and CPU is shared with the server under test.
		debug.SetGCPercent(400)
	}
	if path := os.Getenv("LOADGEN_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		defer f.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdin, os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		fmt.Fprintf(os.Stderr, "loadgen: cpu user %v sys %v, max rss %d MiB\n",
			time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), ru.Maxrss>>10)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
