//go:build race

package main

// raceEnabled: the race detector slows decoding tenfold, so tests of large
// batches use fewer resources.
const raceEnabled = true
