package admin

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsd/xdsd/resource"
)

// Limits bound the admin writes (applies, deletes) in progress, so that a
// burst of large applies cannot take the server's memory: past a bound a
// write is answered 429 Too Many Requests with Retry-After, and the
// client tries again.
type Limits struct {
	// Concurrent is how many writes are processed at once. Default 2.
	Concurrent int
	// Bytes bounds the request bodies of the writes in progress, counted
	// by their Content-Length (a body of unknown length counts as the
	// largest accepted). Default 512 MiB.
	Bytes int64
}

// writeGate admits writes within Limits.
type writeGate struct {
	l        Limits
	rejected *prometheus.CounterVec

	mu       sync.Mutex
	running  int
	inflight int64
}

func newWriteGate(l Limits, reg prometheus.Registerer) *writeGate {
	if l.Concurrent <= 0 {
		l.Concurrent = 2
	}
	if l.Bytes <= 0 {
		l.Bytes = 512 << 20
	}
	g := &writeGate{l: l, rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_admin_writes_rejected_total",
		Help: "Admin writes answered 429 because too many, or too many bytes, were in progress, by reason."}, []string{"reason"})}
	if reg != nil {
		reg.MustRegister(g.rejected)
	}
	return g
}

// admit wraps a write handler.
func (g *writeGate) admit(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		size := r.ContentLength
		if size < 0 || size > resource.MaxDocumentBytes {
			size = resource.MaxDocumentBytes
		}
		g.mu.Lock()
		var reason string
		switch {
		case g.running >= g.l.Concurrent:
			reason = "concurrent"
		case g.running > 0 && g.inflight+size > g.l.Bytes:
			// (One write is always admitted, however large: its own
			// size limit applies to it.)
			reason = "bytes"
		default:
			g.running++
			g.inflight += size
		}
		g.mu.Unlock()
		if reason != "" {
			g.rejected.WithLabelValues(reason).Inc()
			w.Header().Set("Retry-After", "1")
			if r.ContentLength != 0 {
				// The body is not read. Without this, net/http reads
				// what is left of it before it sends the answer, to
				// keep the connection: a body still being sent (of
				// unknown length, say a pipe) would hold the 429 back
				// until the client finished it, and a client that
				// waits for the answer before sending more would wait
				// forever. Closing the connection answers at once.
				w.Header().Set("Connection", "close")
			}
			writeError(w, http.StatusTooManyRequests, fmt.Errorf("too many writes in progress (%s limit: %d at once, %d bytes); try again",
				reason, g.l.Concurrent, g.l.Bytes))
			return
		}
		defer func() {
			g.mu.Lock()
			g.running--
			g.inflight -= size
			g.mu.Unlock()
		}()
		h(w, r)
	}
}
