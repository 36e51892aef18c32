// Package testutil holds what tests across xdsd share: waiting on a
// condition with a deadline. The packages below it start real components
// for tests (an origin server, etcd, certificates, protocol streams, the
// store conformance suite, large resource sets). Only tests import them.
package testutil

import (
	"testing"
	"time"
)

// Wait bounds every wait of Eventually. It is generous on purpose: a test
// waits on an event, and the deadline only turns a hang into a failure, so
// a loaded machine (CI on two cores, another build beside it) must never
// reach it while the event is on its way.
const Wait = 60 * time.Second

// Eventually polls cond until it holds, and fails the test, naming what it
// waited for, if it does not hold within Wait. It is for state that has no
// event to wait on (a counter another goroutine moves); where a channel or
// a callback says when something happened, wait on that instead.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, Wait, what, cond)
}

// EventuallyWithin is Eventually with a deadline of its own.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for: %s", d, what)
		}
	}
}
