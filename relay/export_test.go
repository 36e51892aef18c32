package relay

import "time"

// WithPendingWait shortens how long a SotW full state waits for names the
// upstream has not answered (5s), for tests.
func WithPendingWait(o Options, d time.Duration) Options {
	o.pendingWait = d
	return o
}
