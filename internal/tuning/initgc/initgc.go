// Package initgc keeps the garbage collector from running for the xdsd
// binary's initialisation.
//
// Every xdsd command, `xdsd apply` included, first initialises every
// package linked in: the protobuf descriptors of all Envoy types (about
// 500 packages, 5 MB allocated, most of it kept). The runtime starts its
// first collection at a 4 MB heap: in the middle of that, or, were the
// collector merely off until main, as soon as main allocates. Either way a
// command that takes 25 ms of CPU spent about 5 of them marking what
// initialisation keeps (the measurement is in package tuning's doc).
//
// This package turns the collector off from early in the initialisation:
// it imports only runtime packages, so it is initialised before the
// Envoy packages (Go initialises packages in import-path order among
// those whose imports are done, and the Envoy packages wait for
// google.golang.org/protobuf). The main package's init, which runs after
// every package it imports, calls Restore: the first collection is then
// due when the heap has grown by what it would have grown by from empty
// (4 MB at GOGC=100), past what initialisation left, so a short command
// runs none; once one has run, the percentage the process started with
// is back. A long-running command calls Settle as it starts: it gets that
// percentage at once, before anything else reads or steers it (xdsd
// serve's internal/tuning notes GOGC as an apply begins, to put it back
// after). Only cmd/xdsd imports this package: a program that imports it
// must call Restore from its main package's init.
package initgc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// prev is the GC percentage the process started with (GOGC, 100 by
// default).
var prev = debug.SetGCPercent(-1)

// heapMinimum is the runtime's smallest collection goal at GOGC=100: no
// collection runs before the heap reaches it.
const heapMinimum = 4 << 20

// Restore turns the collector back on, its first goal past the heap that
// initialisation left, and gives it back the percentage the process
// started with after that first collection.
func Restore() {
	if prev < 0 {
		debug.SetGCPercent(prev) // GOGC=off: the operator's choice
		return
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	var heap uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		heap = s[0].Value.Uint64()
	}
	// The goal before the first collection is heapMinimum × GOGC/100:
	// this GOGC makes it heap + heapMinimum × prev/100.
	debug.SetGCPercent(prev + int(heap*100/heapMinimum))
	// A sentinel that only a collection frees says when the first one
	// has run (large enough not to share a tiny block with anything).
	sentinel := new([64]byte)
	runtime.AddCleanup(sentinel, func(p int) {
		if !settled.Load() {
			debug.SetGCPercent(p)
		}
	}, prev)
}

// settled is set by Settle: the percentage is the process's, and what
// steers it from then on is not to be undone by Restore's cleanup.
var settled atomic.Bool

// Settle gives the collector the percentage the process started with
// now, for a command that runs long (xdsd serve, xdsd relay): its first
// collection is then due at once, as without this package, and nothing
// that reads GOGC later (internal/tuning) sees the raised one.
func Settle() {
	if !settled.Swap(true) {
		debug.SetGCPercent(prev)
	}
}
