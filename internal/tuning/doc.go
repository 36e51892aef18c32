// Package tuning holds every place where xdsd steers the Go runtime
// rather than leaving it to its defaults, and why each pays for itself.
// A knob lives here, or next to the test or benchmark that shows its
// effect; one that stops paying for itself is removed, not kept "just
// in case". Each entry names the measurement that justifies it: re-run
// it when the code around the knob, or the Go release, changes.
//
// # GOGC while applies run (Memory)
//
// GOGC is the process's, so only the program decides whether it is
// steered: `xdsd serve` passes Process() to the admin API
// (admin.Options.Memory); an embedder opts in with server.Options.TuneGC;
// the relay and tests of other packages leave the runtime alone.
//
// While applies decode their batches without client checks, the
// collector's goal (the live heap, grown by GOGC percent) is held to what
// the process held before them plus 1.6 times the bytes they have read
// (16 MiB at least): GOGC follows the batch, between 25 and 100, set
// again after each collection. A batch whose variants are small beside
// its JSON (Istio-like clusters: 0.8 of it) gets GOGC near 100; one whose
// variants weigh more (a mesh of 1 KB resources) gets 50 or less. A fixed
// 50 spent 15 % of an apply of 100,000 clusters collecting, and 100 let
// that mesh grow the server past twice its size.
//
// GOGC is 25 while an apply with client checks runs (their index of
// references is live too), and while a batch is being stored (the store's
// transaction holds its records and pages until it commits). A 150 MB
// batch is live at about its size while it is stored: with the default,
// the server took 3.2 times its size in RSS. Keeping 50 in the store's
// part too was 5 to 10 % faster, but let a full re-apply grow the server
// by 1.9 to 2.05 times the input, and a mesh of 1 KB resources by up to
// 2.0 times (1.8 with 25 there). A soft memory limit that followed the
// bytes read held the heap lower still, but made the collector run
// without pause once an apply with client checks went past it: twice
// the time.
//
// An apply whose body is known to be under 1 MiB leaves GOGC alone
// (Memory.BeginBody): it cannot grow the heap enough to matter, and
// lowering GOGC to 25 for it started a collection of the whole heap at
// once. With 5,000 SotW streams × 100 clusters connected to `xdsd serve`,
// that collection and its assists during the fan-out that followed were
// about 30 ms of CPU per one-cluster `xdsd apply` (bench scenario h, pprof
// of serve: gcAssistAlloc and the mark workers, 15 % of serve's CPU
// against 3 % for the embedded server taking the same changes).
//
// A lower GOGC set for the process (GOGC=10, or off) is kept; the
// setting before comes back when the last running apply ends, and the
// memory an apply of 64 MiB or more freed is returned to the system then
// (debug.FreeOSMemory) rather than over the following minutes.
//
// Measured by bench/scripts/large-apply.sh (BENCHMARKS.md, "Large
// batches": time, and the server's growth against the input) and held
// by TestApplyLargeBatchBudget (cmd/xdsd: the live heap stays under twice the
// input). Still paying for itself on 2026-11-27, 20,000 clusters, four
// interleaved runs each: with it the server's anonymous memory grew by
// 1.36-1.55 times the input, without it by 2.02-2.22 times; without it
// the apply took 3.0-4.3 s against 4.2-7.2 s (a loaded machine: time
// moved by 2x between runs of the same binary).
//
// # A log line on a stack of its own (OnOwnStack)
//
// A stream's handler goroutine waits in gRPC's read for the whole life of
// the stream with about 4 KiB of its stack in use. The runtime halves a
// stack only while under a quarter of it is in use, so a handler whose
// stack once grew to 16 KiB keeps 16 KiB for good. Formatting the "client
// connected" line (slog's handlers go deeper than anything else a stream
// does) was enough to grow it; the line is formatted on a goroutine of
// its own, waited for. TestIdleStreamBudget (internal/protocol, built
// without -race) measures an idle stream at 15.0 to 15.2 KiB with this,
// 15.3 to 18.5 KiB without (budget 16 KiB).
//
// # No collection for the xdsd binary's initialisation (initgc)
//
// Every xdsd command, a one-cluster `xdsd apply` included, first
// initialises every package linked in, most of it the protobuf
// descriptors of the Envoy types: about 5 MB allocated, most of it kept.
// The runtime's first collection, due at a 4 MB heap, fell in the middle
// of it and was paid for in assists by the initialising goroutine; with
// the collector merely off until main, it ran as soon as main allocated.
// The sub-package initgc, imported by cmd/xdsd only, keeps it off until
// the main package's init, then makes the first collection due 4 MB past
// the heap initialisation left (as from an empty heap), and puts GOGC
// back after that collection. A one-cluster `xdsd apply` (no streams, 30
// interleaved runs, load 19) took 17.9 ms of CPU (15.0-20.3) against 24.6
// ms (18.9-32.2), and 24.9 ms of wall time against 32.9 ms; it runs no
// collection at all. `xdsd serve` and `xdsd relay` run long and have
// their GOGC at once (initgc.Settle, as they start): Memory notes GOGC
// when an apply begins, to put it back after, and must never note the
// raised one. TestNoCollectionWhileInitialising and
// TestCollectorOnAfterInit (cmd/xdsd) check both halves. Embedders import
// neither, and keep the runtime's defaults.
//
// # Sending on a few goroutines (SendWorkers)
//
// A protocol server computes and sends responses on a pool of goroutines
// that go from one signalled stream to the next (internal/protocol,
// sendPool), SendWorkers of them, one per core, while streams wait, and
// another whenever all of them are inside a send (which may wait on a
// slow client's flow control for good). Before, each stream with
// something to send had a goroutine started for it, which ended once it
// had sent: for a change reaching 5,000 streams, 5,000 goroutines started
// and ended, about a tenth of the server's CPU (runtime.newproc and
// goexit0 in a pprof of the bench server). Fewer goroutines than cores
// would leave a core idle while a fan-out waits; more only take turns on
// the same cores. Measured by `cd bench && go run ./cmd/xdsbench
// -scenarios a,c -impls xdsd,raw -rounds 9`, four runs each by turns
// with goroutines started per stream, on 2026-11-28 (load average 8-10,
// so CPU per response, not time): the server's CPU per response fell
// from 21.2 to 13.8 µs in (a) and from 14.4 to 12.3 µs in (c) (medians
// of 36 rounds; BENCHMARKS.md, "The send pool"). Starting a goroutine
// beyond SendWorkers each time one entered a send, rather than only once
// all are inside one, cost 30 % more CPU per response in both.
// TestSlowStreamsHoldUpNoOne holds the slow-client guarantee.
//
// # Not in code: GODEBUG=adaptivestackstart=0
//
// The runtime starts goroutines with the average stack it has seen in
// use; a connection storm raises that average, and handler goroutines
// that start at 16 KiB never shrink. The runtime reads the setting only
// at start, from the environment (//go:debug does not offer it), so it
// is a recommendation for operators (BENCHMARKS.md, "Connection storms")
// and TestIdleStreamBudget's server process runs with it.
package tuning
