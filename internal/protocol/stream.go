package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/tuning"
	"github.com/xdsd/xdsd/resource"
)

// Client features that say a SotW client takes resources wrapped in
// envoy.service.discovery.v3.Resource (docs/protocol.md §1.10): Envoy's name and
// the one gRPC sends.
var wrapFeatures = []string{"xds.config.supports-resource-in-sotw", "xds.config.resource-in-sotw"}

// ttlFeature says a client honours Resource.ttl and heartbeats: over delta,
// and over SotW when it also takes wrapped resources (the TTL is a field of
// the wrapper). A SotW heartbeat of a full-state type (LDS, CDS) is the
// whole state again, not payload-less resources: a SotW response of such a
// type is the complete set, so one carrying only heartbeats would read as
// a state without the resources it renews.
const ttlFeature = "xds.config.supports-resource-ttl"

// stream is one downstream xDS stream.
type stream struct {
	srv       *Server
	ss        grpc.ServerStream
	cancel    context.CancelFunc
	raw       rawRequest // the SotW request buffer, reused (fastack.go)
	fixedType string     // a per-type service's type; "" for ADS
	id        uint64
	addr      string
	identity  string // the client certificate's URI SAN (internal/mtls)
	// assigned: the parameters the policy sets for the identity
	// (Guard.Assigned), over the node metadata's and every locator's.
	assigned map[string]string
	started  time.Time

	sub *db.Subscriber
	// A single-goroutine stream (runSingle) is queued on the server's send
	// pool when signalled; a paired one (runPaired) wakes its sender
	// through wake.
	wake    chan struct{}
	sendMu  sync.Mutex
	sender  int32       // senderIdle…senderStopped, guarded by sendMu
	closing atomic.Bool // Close ended the stream (beside sender: no padding)
	senders sync.WaitGroup
	sendErr atomic.Pointer[error]
	timerMu sync.Mutex
	timer   *time.Timer // heartbeats and full-state waits, made when first needed

	mu         sync.Mutex
	node       *corev3.Node
	nodeParams constraint.Params
	member     *fleet.Member // the stream's place in the fleet index (counted once it has a node)
	wrap       bool          // SotW client takes wrapped resources
	ttl        bool          // delta client supports TTLs and heartbeats (§2.7)
	delta      bool          // beside the other bools: no padding (TestIdleStreamBudget)
	rechecks   atomic.Bool   // a SotW full state has waited for its source (Policy.PendingWait)
	outs       []out         // collect's result, reused (guarded by mu)
	types      map[string]*typeState
	typeList   []*typeState // types' values, in the order made: walked without a map iterator
	lastType   *typeState   // the one knownType last found
	nonces     uint64
	watchCount int
	subBytes   int64       // subscription state, in subCost bytes (MaxSubscriptionBytes)
	conn       *connBudget // the connection's, shared by its streams
	declared   int         // initial_resource_versions entries taken, all types
	nackLog    logLimit
	denyLog    logLimit
	requests   int
	limiter    rate.Limiter // the request rate (initLimiter)
}

func (s *stream) kind() string {
	k := "sotw"
	if s.delta {
		k = "delta"
	}
	if s.fixedType == "" {
		return "ads-" + k
	}
	return k
}

func (s *stream) signal() {
	if s.wake != nil {
		select {
		case s.wake <- struct{}{}:
		default:
		}
		return
	}
	s.sendMu.Lock()
	switch s.sender {
	case senderIdle:
		s.sender = senderRunning
		s.senders.Add(1)
		s.srv.sendq.add(s)
	case senderRunning:
		s.sender = senderAgain
	}
	// senderAgain: the running sender collects again; senderStopped: over.
	s.sendMu.Unlock()
}

// States of a stream's sender (single-goroutine streams, runSingle).
const (
	senderIdle    int32 = iota // not queued on the send pool, nothing being sent
	senderRunning              // queued, or being sent on by a pool goroutine
	senderAgain                // being sent on, and signalled since it last collected
	senderStopped              // the stream is over: it is queued no more
)

// run serves the stream until it ends, on the gRPC handler's goroutine.
// With ServerOptions' stream context (stop, non-nil) an idle stream costs
// that one goroutine: it reads requests, and responses are computed and
// sent by the server's send pool, whose goroutines exist only while some
// stream has something to send (runSingle, sendPool). Without it, run cannot end a read in progress, so it keeps a
// second goroutine for reading (runPaired).
func (s *stream) run(ctx context.Context, stop context.CancelFunc) error {
	if stop == nil {
		return s.runPaired(ctx)
	}
	return s.runSingle(ctx)
}

// runSingle reads and applies requests on the handler's goroutine. The
// stream's context (ctx) is the one ServerOptions' tap gave the gRPC
// stream, so cancelling it (Close, a failed send, a bad request) ends a
// read in progress and a send waiting for flow control: the handler never
// returns while the send pool may still call SendMsg on the stream.
func (s *stream) runSingle(ctx context.Context) error {
	err := s.recvLoop(ctx)
	if errors.Is(err, io.EOF) {
		// The client half-closed: it sends no more requests, but
		// gRPC lets the server go on sending, and what it subscribed
		// to may still change. Serve it until it goes away.
		<-ctx.Done()
		err = ctx.Err()
	}
	s.cancel() // ends a send waiting for flow control
	s.sendMu.Lock()
	s.sender = senderStopped
	s.sendMu.Unlock()
	s.senders.Wait()
	s.timerMu.Lock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timerMu.Unlock()
	s.teardown()
	if e := s.sendErr.Load(); e != nil {
		return *e // the first cause: the read failed because the send did
	}
	return err
}

// sendDue is a single-goroutine stream's sender, run by the server's send
// pool: it sends what is due until nothing is (signal queues the stream
// again when there is more).
func (s *stream) sendDue() {
	defer s.senders.Done()
	for {
		if err := s.flush(); err != nil {
			s.failed(err)
			return
		}
		s.sendMu.Lock()
		st := s.sender
		switch st {
		case senderAgain:
			s.sender = senderRunning
		case senderRunning:
			s.sender = senderIdle
		}
		s.sendMu.Unlock()
		if st == senderStopped {
			return
		}
		if st == senderRunning {
			break
		}
	}
	// hb fires when TTL heartbeats are due (docs/protocol.md §2.7), or when a
	// SotW full state has waited for the source long enough
	// (Policy.PendingWait). The timer exists only on streams that need one.
	if next, ok := s.nextTimer(); ok {
		s.timerMu.Lock()
		if s.timer == nil {
			s.timer = time.AfterFunc(time.Until(next), func() {
				s.timerDue(time.Now())
				s.signal()
			})
		} else {
			s.timer.Reset(time.Until(next))
		}
		s.timerMu.Unlock()
	}
}

// failed records the first error a send met and ends the stream. Apart
// from sendDue, so that only a failure allocates the error's copy (an
// error variable whose address is taken is allocated where it is
// declared: in sendDue, on every flush).
func (s *stream) failed(err error) {
	s.sendErr.CompareAndSwap(nil, &err)
	s.cancel()
}

// flush computes and sends every response due.
func (s *stream) flush() error {
	for {
		out := s.collect()
		if len(out) == 0 {
			return nil
		}
		for i := range out {
			var err error
			if s.wake == nil {
				err = s.srv.sendq.send(s, &out[i].enc)
			} else {
				err = s.ss.SendMsg(&out[i].enc)
			}
			if err != nil {
				return err
			}
			s.srv.metrics.sent(&out[i])
		}
	}
}

// runPaired serves the stream until it ends. Requests are read and applied on a
// receiving goroutine, responses computed and sent on this one, so neither
// a slow client nor a burst of changes ever blocks the other direction.
//
// The receiving goroutine owns the stream's subscriptions: as it ends,
// after the last request it applied, it unsubscribes them all (teardown),
// so none can outlive the stream. run returns once it has ended — unless
// the stream ends from this side (the server closing, a send failing) while
// the client keeps it open: the receiving goroutine is then blocked in
// RecvMsg, which gRPC ends only once the handler has returned, so run
// returns first and the teardown follows as gRPC ends the stream.
func (s *stream) runPaired(ctx context.Context) error {
	recvErr := make(chan error, 1)
	go func() {
		err := s.recvLoop(ctx)
		if errors.Is(err, io.EOF) {
			<-ctx.Done()
			err = ctx.Err()
		}
		s.teardown()
		recvErr <- err
	}()
	// join waits for the receiving goroutine when it can end.
	join := func(err error) error {
		if s.ss.Context().Err() != nil {
			<-recvErr
		}
		return err
	}
	hb := time.NewTimer(time.Hour)
	hb.Stop()
	defer hb.Stop()
	for {
		select {
		case <-s.wake:
		case <-hb.C:
			s.timerDue(time.Now())
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return join(ctx.Err())
		}
		if err := s.flush(); err != nil {
			return join(err)
		}
		if next, ok := s.nextTimer(); ok {
			hb.Reset(time.Until(next))
		}
	}
}

// teardown ends every subscription of the stream, which is over.
func (s *stream) teardown() {
	s.mu.Lock()
	var subs []db.Sub
	for _, ts := range s.types {
		for _, w := range ts.ws.m {
			subs = append(subs, *w)
		}
	}
	m := s.member
	s.mu.Unlock()
	s.srv.fleet.Leave(m)
	for _, w := range subs {
		s.srv.db.Unsubscribe(s.sub, w)
	}
}

// recvLoop reads and applies requests until the stream ends; one read
// after the stream is over (ctx ended: the sending side is gone) is not
// applied.
//
// A request is counted in the connection's bound on requests held
// (inflight.Conn.Hold) from the moment it is read until it is applied:
// through the rate limiter's wait and the decoding, its second copy.
func (s *stream) recvLoop(ctx context.Context) error {
	for {
		var err error
		acked := false // a plain ACK, handled on the fast path
		var held int64 // bytes Held of the connection's bound
		if err = s.ss.RecvMsg(&s.raw); err == nil {
			held = int64(len(s.raw.b))
			if err = s.hold(held); err == nil {
				err = s.limiter.Wait(ctx)
			}
			if err == nil && ctx.Err() == nil {
				if s.delta {
					if t, n, ok := readPlainDeltaAck(s.raw.b); ok && s.handlePlainDeltaAck(t, n) {
						acked = true
					} else {
						err = s.aside(func() error {
							req := &discoveryv3.DeltaDiscoveryRequest{}
							if err := proto.Unmarshal(s.raw.b, req); err != nil {
								return status.Errorf(codes.InvalidArgument, "bad DeltaDiscoveryRequest: %v", err)
							}
							return s.handleDelta(req)
						})
					}
				} else if a, ok := readPlainAck(s.raw.b); ok && s.handlePlainAck(a) {
					acked = true
				} else {
					err = s.aside(func() error {
						req := &discoveryv3.DiscoveryRequest{}
						if err := proto.Unmarshal(s.raw.b, req); err != nil {
							return status.Errorf(codes.InvalidArgument, "bad DiscoveryRequest: %v", err)
						}
						return s.handleSotW(req)
					})
				}
			}
		}
		s.conn.reqs.Release(held)
		if cap(s.raw.b) > maxFastBytes {
			// A request too large for the fast path is decoded in full,
			// next to which a fresh buffer costs little; kept, the buffer
			// would stay at its largest for the stream's life: 16 MiB a
			// stream at --max-msg-size's default (TestCompleteRequestCost).
			s.raw.b = nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return err
		}
		// A plain ACK only records what the client holds: it makes
		// nothing due, and whatever is due was signalled when it became
		// so (a change, a request, a timer), so it wakes no sender.
		if !acked && s.due() {
			s.signal()
		}
	}
}

// hold counts a request just read in the connection's bound; over it,
// the connection is closed.
func (s *stream) hold(n int64) error {
	if err := s.conn.reqs.Hold(n); err != nil {
		return status.Errorf(codes.ResourceExhausted, "%v", err)
	}
	return nil
}

// aside handles a request that is not a plain ACK. On a single-goroutine
// stream it does so on a goroutine of its own, and waits: decoding,
// subscribing and logging can take more stack than the 8 KiB an idle
// stream's goroutine keeps, and a goroutine's stack, once grown, stays
// grown for as long as the goroutine stays blocked deep in gRPC's read
// (the runtime halves a stack only while under a quarter of it is in use).
func (s *stream) aside(handle func() error) error {
	if s.wake != nil {
		return handle()
	}
	done := make(chan error, 1)
	go func() { done <- handle() }()
	return <-done
}

// due reports whether a request left responses to compute, so that an ACK
// does not wake the sender for nothing.
func (s *stream) due() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.typeList {
		if ts.busy() {
			return true
		}
	}
	return false
}

// requestType checks the type URL of a request against the service.
func (s *stream) requestType(typeURL string) (string, error) {
	if s.fixedType != "" {
		if typeURL == "" {
			return s.fixedType, nil
		}
		if typeURL != s.fixedType {
			return "", status.Errorf(codes.InvalidArgument, "type_url %q on the %s service", typeURL, resource.ForURL(s.fixedType).Name)
		}
	}
	if typeURL == "" {
		return "", status.Error(codes.InvalidArgument, "type_url is empty")
	}
	return typeURL, nil
}

// setNode takes the node from the first request that carries one. Its
// string metadata fields stand in for dynamic parameters on subscriptions
// that carry none (docs/architecture.md §4.5, TP2 "Migrating From Node Metadata").
func (s *stream) setNode(n *corev3.Node) {
	if n == nil || s.node != nil {
		return
	}
	// Envoy lists every extension it was built with (hundreds: tens of KiB
	// decoded) on its node; nothing here uses them, and kept on every
	// stream they would cost more than the stream itself. n is this
	// request's own message.
	n.Extensions = nil
	s.node = n
	s.nodeParams = NodeParams(n)
	if s.srv.log.Enabled(context.Background(), slog.LevelInfo) {
		// On a stack of its own: formatting goes deeper than anything
		// else a stream does, and would grow the handler's stack for good
		// (internal/tuning, TestIdleStreamBudget).
		tuning.OnOwnStack(func() {
			s.srv.log.Info("client connected", "stream", s.id, "node", truncate(n.GetId(), maxLoggedText), "identity", s.identity, "address", s.addr,
				"kind", s.kind(), "params", paramsAttr(s.nodeParams))
		})
	}
	for _, f := range n.GetClientFeatures() {
		for _, w := range wrapFeatures {
			if f == w && !s.delta {
				// Wrapping (with constraints) is a SotW matter: a delta
				// client gets constraints only by locator (docs/architecture.md §4.5).
				s.wrap = true
			}
		}
		if f == ttlFeature {
			s.ttl = true
		}
	}
	// Over SotW a TTL travels in a wrapped resource: a client that takes
	// none gets no TTLs.
	s.ttl = s.ttl && (s.delta || s.wrap)
}

// NodeParams are the dynamic parameters an unmodified client is taken to
// send: the string fields of its node metadata.
func NodeParams(n *corev3.Node) constraint.Params {
	p := constraint.Params{}
	for k, v := range n.GetMetadata().GetFields() {
		if sv, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			p[k] = sv.StringValue
		}
	}
	return p
}

func (s *stream) typeState(typeURL string) *typeState {
	ts := s.types[typeURL]
	if ts == nil {
		ts = newTypeState(resource.ForURL(typeURL))
		s.types[typeURL] = ts
		s.typeList = append(s.typeList, ts)
	}
	return ts
}

// maxLoggedText bounds client-supplied text (NACK details) in logs and
// statuses, so that a client cannot flood them.
const maxLoggedText = 1024

// logLimit lets one line through per logEvery for a stream's repeated
// event, counting what it held back, so that no client can flood the log.
type logLimit struct {
	last       time.Time
	suppressed int
}

const logEvery = time.Second

// allow reports whether to log now, and how many were held back since the
// last line logged.
func (l *logLimit) allow(now time.Time) (int, bool) {
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}

// truncate cuts s to at most n bytes, on a rune boundary, saying how much
// was cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes)", s[:cut], len(s)-cut)
}

func (s *stream) String() string {
	return fmt.Sprintf("stream %d (%s, node %q, %s)", s.id, s.kind(), s.node.GetId(), s.addr)
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// paramsAttr shows node parameters in a log line, bounded in size.
func paramsAttr(p map[string]string) string {
	keys := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + p[k])
	}
	return truncate(b.String(), maxLoggedText)
}
