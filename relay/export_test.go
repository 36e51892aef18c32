package relay

import (
	"time"

	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/protocol"
)

// WithPendingWait shortens how long a SotW full state waits for names the
// upstream has not answered (5s), for tests.
func WithPendingWait(o Options, d time.Duration) Options {
	o.pendingWait = d
	return o
}

// Streams reports the downstream streams, for tests.
func (r *Relay) Streams() []protocol.StreamStatus { return r.r.Streams() }

// Groups reports the downstream streams by agent and parameter set, for
// tests.
func (r *Relay) Groups() []fleet.Group { return r.r.Protocol().Groups() }
