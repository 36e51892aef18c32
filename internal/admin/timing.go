package admin

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// An apply's answer says where its time went, phase by phase, in a
// Server-Timing header (the W3C's: browsers' developer tools and
// `curl -v` show it), and its debug log line gives the same. An operator asking "why did this apply take 300
// ms?" is told whether it was the body, the checks, the guard, the commit
// (the store's fsync) or waiting for the revision to be served, without a
// profiler.

// phases times the steps of one write, in order.
type phases struct {
	start, last time.Time
	names       []string
	took        []time.Duration
}

type phasesKey struct{}

// withPhases returns r carrying a new phase timer that starts now, and
// the timer.
func withPhases(r *http.Request) (*http.Request, *phases) {
	now := time.Now()
	p := &phases{start: now, last: now}
	return r.WithContext(context.WithValue(r.Context(), phasesKey{}, p)), p
}

// phasesOf is the timer withPhases gave ctx, or nil (whose marks do
// nothing).
func phasesOf(ctx context.Context) *phases {
	p, _ := ctx.Value(phasesKey{}).(*phases)
	return p
}

// mark ends the phase called name: the time since the last mark (or the
// start).
func (p *phases) mark(name string) {
	if p == nil {
		return
	}
	now := time.Now()
	p.names = append(p.names, name)
	p.took = append(p.took, now.Sub(p.last))
	p.last = now
}

// header is the Server-Timing value: each phase's milliseconds, then
// the total ("read;dur=1.204, commit;dur=9.870, total;dur=11.3").
func (p *phases) header() string {
	if p == nil {
		return ""
	}
	var sb strings.Builder
	for i, n := range p.names {
		fmt.Fprintf(&sb, "%s;dur=%.3f, ", n, ms(p.took[i]))
	}
	fmt.Fprintf(&sb, "total;dur=%.3f", ms(p.last.Sub(p.start)))
	return sb.String()
}

// setHeader sets the Server-Timing header on w, before the answer is
// written.
func (p *phases) setHeader(w http.ResponseWriter) {
	if p != nil && len(p.names) > 0 {
		w.Header().Set("Server-Timing", p.header())
	}
}

// attr is the phases as one log attribute: "phases" = "read=1.2ms
// commit=9.9ms …".
func (p *phases) attr() slog.Attr {
	if p == nil {
		return slog.String("phases", "")
	}
	var sb strings.Builder
	for i, n := range p.names {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%.1fms", n, ms(p.took[i]))
	}
	return slog.String("phases", sb.String())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
