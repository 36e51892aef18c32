package protocol

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/inflight"
)

// Subscription state is bounded in bytes, not only in count
// (Options.MaxSubscriptions): per stream, and per connection for all its
// streams together, so that opening more streams on one connection does
// not multiply it. The bound is on the connection, not the identity:
// every client without a certificate has the identity "", and one of them
// must not use up the others' share.
//
// The bytes are an estimate, counted as subscriptions are made and
// dropped, of the heap they hold: the watch, its entries in the stream's
// watch set and held set, the database's subscriber index and the fleet
// index. TestSubscriptionCostModel measures the real figure and checks
// that the estimate does not fall short of it.

// connBudget is the subscription state of one connection's streams, in
// subCost bytes.
type connBudget struct {
	bytes   atomic.Int64
	streams int // guarded by Server.mu
	// reqs bounds the requests the connection's streams hold while they
	// handle them (recvLoop), with those it is still sending: nil on a
	// listener without the bound (inflight.Creds).
	reqs *inflight.Conn
}

// Fixed and per-byte parts of subCost and declaredCost.
const (
	subFixed      = 1100
	subPerByte    = 4
	declaredFixed = 300
	declaredByte  = 2
)

// subCost is what one subscription costs the server, in bytes: a fixed
// part, and its name and parameters, which several of the structures
// above keep a copy or a key of.
func subCost(w *db.Sub) int64 {
	return subFixed + subPerByte*int64(len(w.Name)+len(w.ParamsKey))
}

// declaredCost is what one entry of initial_resource_versions costs: a
// held entry of the name and version.
func declaredCost(name, version string) int64 {
	return declaredFixed + declaredByte*int64(len(name)+len(version))
}

// overStream fails with RESOURCE_EXHAUSTED, naming the limit and its
// flag, when adding more bytes of subscription state would take the
// stream past MaxSubscriptionBytes (s.mu held). A refusal ends the stream
// and is counted (xdsd_subscription_bytes_refused_total).
func (s *stream) overStream(more int64) error {
	if limit := s.srv.opts.MaxSubscriptionBytes; more > 0 && s.subBytes+more > limit {
		s.srv.metrics.subRefused.WithLabelValues("stream").Inc()
		return status.Errorf(codes.ResourceExhausted,
			"subscription state: this request would take the stream to %d bytes, over the limit of %d bytes a stream (--max-subscription-bytes); subscribe to fewer or shorter names, or raise the limit",
			s.subBytes+more, limit)
	}
	return nil
}

// reserve takes more bytes of subscription state (or gives back, when
// negative) from the stream's connection, failing with
// RESOURCE_EXHAUSTED, naming the limit and its flag, when that would take
// the connection past MaxConnSubscriptionBytes (s.mu held). The bytes are
// reserved before the change is applied, so streams of one connection
// adding at once cannot pass the limit together.
func (s *stream) reserve(more int64) error {
	if s.conn == nil || more == 0 {
		return nil
	}
	if more < 0 {
		s.conn.bytes.Add(more)
		return nil
	}
	limit := s.srv.opts.MaxConnSubscriptionBytes
	for {
		cur := s.conn.bytes.Load()
		if cur+more > limit {
			s.srv.metrics.subRefused.WithLabelValues("connection").Inc()
			return status.Errorf(codes.ResourceExhausted,
				"subscription state: this request would take the connection (all its streams together) to %d bytes, over the limit of %d bytes a connection (--max-connection-subscription-bytes); subscribe to fewer names, use fewer streams, or raise the limit",
				cur+more, limit)
		}
		if s.conn.bytes.CompareAndSwap(cur, cur+more) {
			return nil
		}
	}
}

// connKey names a stream's connection: both ends' addresses, so that
// connections from one address are told apart by port. Listeners whose
// peers have no distinct address (none of xdsd's) share one budget, the
// stricter way to err.
func connKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if p.LocalAddr == nil {
		return p.Addr.String()
	}
	return p.LocalAddr.String() + " " + p.Addr.String()
}
