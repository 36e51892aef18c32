package protocol

import (
	"context"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/mtls"
	"github.com/xdsd/xdsd/internal/redact"
	"github.com/xdsd/xdsd/resource"
)

// Guard is an authorization policy (xdsd --policy; internal/policy
// implements it). The engine only asks it: what a stream's client may
// receive, and which dynamic parameter values it may claim. A client's
// identity is the URI SAN of its verified certificate ("" without mTLS).
type Guard interface {
	// Allow returns "" when identity may receive the resource typeURL
	// name, or the reason it may not (a short word, the label of
	// xdsd_denied_total).
	Allow(identity, typeURL, name string) string
	// Claim returns an error naming the first parameter of params that
	// identity may not claim, or nil.
	Claim(identity string, params map[string]string) error
	// Assigned returns the parameters the policy sets for identity on
	// every subscription and in its node metadata's, whatever it claims
	// or omits (nil when none).
	Assigned(identity string) map[string]string
	// CSDSAll reports whether identity may see every client in CSDS;
	// otherwise it sees only the clients of its own identity.
	CSDSAll(identity string) bool
}

// denyMetric counts refusals by reason.
func denyMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "xdsd_denied_total",
		Help: "Subscriptions answered as if the resource did not exist, and streams ended, because the policy denies them, by reason."},
		[]string{"reason"})
}

// hidden is the filter desire applies to what a stream may be sent: nil
// without a policy, else a function reporting whether a name is denied
// (answered as if it did not exist: docs/protocol.md §2.2 absent for a
// named subscription, left out of a wildcard or glob).
func (s *stream) hidden(typeURL string) func(name string) bool {
	g := s.srv.opts.Guard
	if g == nil {
		return nil
	}
	return func(name string) bool { return g.Allow(s.identity, typeURL, name) != "" }
}

// denies reports whether the policy denies a named subscription, and
// counts and logs (rate-limited) the denial (s.mu held). A denied name is
// answered as if it did not exist and not kept: no subscription, nothing
// held, so that names a client may not have cost the server nothing once
// answered (issue 27: 99,000 denied names held 1.7 KB each).
func (s *stream) denies(w *db.Sub) bool {
	g := s.srv.opts.Guard
	if g == nil || w.Kind != db.Named {
		return false
	}
	reason := g.Allow(s.identity, w.Type, w.Name)
	if reason == "" {
		return false
	}
	s.srv.metrics.denied.WithLabelValues(reason).Inc()
	if suppressed, ok := s.denyLog.allow(time.Now()); ok {
		s.srv.log.Warn("subscription denied by policy; answered as if the resource did not exist",
			"stream", s.id, "identity", s.identity, "address", s.addr, "type", w.Type,
			"name", truncate(w.Name, maxLoggedText), "reason", reason, "suppressed", suppressed)
	}
	return true
}

// claim checks parameters the client claims (where: "node metadata" or a
// locator); a refused claim ends the stream with PERMISSION_DENIED.
func (s *stream) claim(params map[string]string, where string) error {
	g := s.srv.opts.Guard
	if g == nil || len(params) == 0 {
		return nil
	}
	if err := g.Claim(s.identity, params); err != nil {
		s.srv.metrics.denied.WithLabelValues("param").Inc()
		s.srv.log.Warn("stream ended: parameter claim denied by policy", "stream", s.id, "identity", s.identity,
			"address", s.addr, "in", where, "error", err)
		return status.Errorf(codes.PermissionDenied, "%s: %v", where, err)
	}
	return nil
}

// withAssigned returns p with the parameters the policy assigns the
// stream's client set over it (p itself when there are none). The claims
// were checked first, so nothing it overrides disagreed.
func (s *stream) withAssigned(p constraint.Params) constraint.Params {
	if len(s.assigned) == 0 {
		return p
	}
	out := make(constraint.Params, len(p)+len(s.assigned))
	maps.Copy(out, p)
	maps.Copy(out, s.assigned)
	return out
}

// csdsConfig is a variant as CSDS shows it: its secrets (the fields
// marked udpa.annotations.sensitive) replaced by digests, as Envoy's own
// config dump does.
func csdsConfig(v *resource.Variant) *anypb.Any {
	raw := &anypb.Any{TypeUrl: v.PayloadURL, Value: v.Body()}
	m, err := v.Message()
	if err != nil {
		return raw
	}
	r := redact.Message(m)
	if r == m {
		return raw
	}
	a, err := anypb.New(r)
	if err != nil {
		return raw
	}
	a.TypeUrl = v.PayloadURL
	return a
}

// csdsScope is what a CSDS answer shows its caller. With a Guard, only
// the resources the caller's own identity may receive are shown, so that
// CSDS tells no one what the policy hides from them; and only the clients
// of the caller's own identity, unless the policy grants it csds: all (a
// node's id and metadata are a client's own business). Without a Guard
// everything is shown (the loopback default).
type csdsScope struct {
	resource func(typeURL, name string) bool // nil: every resource
	client   func(identity string) bool      // nil: every client
}

func (s *Server) csdsScope(ctx context.Context) csdsScope {
	g := s.opts.Guard
	if g == nil {
		return csdsScope{}
	}
	who := mtls.FromContext(ctx)
	sc := csdsScope{resource: func(typeURL, name string) bool { return g.Allow(who, typeURL, name) == "" }}
	if !g.CSDSAll(who) {
		sc.client = func(identity string) bool { return identity == who }
	}
	return sc
}
