package origin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
)

// Options configure a Server.
type Options struct {
	Protocol   protocol.Options
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// ErrStopped is what WaitRev returns, wrapped with the reason, once the
// server no longer follows its store: a revision it has not loaded by
// then it never will, and a caller waiting for one would wait for ever.
var ErrStopped = errors.New("the server no longer follows its store")

// errServerClosed is the reason following ended when Close ended it.
var errServerClosed = errors.New("the server was closed")

// Server is the server role, assembled: the store feeds the subscription
// db, and the protocol engine serves the db to downstream xDS streams.
// The public server package and `xdsd serve` are both this, each with its
// own front (Go calls, or files and the admin API).
type Server struct {
	store store.Store
	db    *db.DB
	proto *protocol.Server
	log   *slog.Logger
	ready atomic.Bool

	startOnce sync.Once
	cancel    context.CancelFunc // ends following; set by Start
	stopped   chan struct{}      // closed when following has ended

	mu      sync.Mutex
	rev     int64
	revCond chan struct{} // closed when rev advances, or following ends
	why     error         // why following ended (nil while it runs)
	err     error         // the failure that ended it, for Err

	curStage  *db.Stage      // the stage the db serves (follow's own)
	stagedRec store.Revision // its record (Rev 0: none), under mu

	// fleetStage asks every replica for a staged revision's canary
	// (SetFleetStage); fleetNext and heldRev are watchStage's own.
	fleetStage func(ctx context.Context, rev int64) (rollout.Report, error)
	fleetNext  time.Time
	heldRev    int64
	// holdRev and holdWhy say why the staged revision holdRev, baked,
	// is not promoted yet (StageHold), under mu.
	holdRev int64
	holdWhy string
}

// New assembles a server of st. It follows nothing until Start, so that a
// caller can register it on a gRPC server (Register: at least
// protocol.ServerCodec(); protocol.ServerOptions() also keeps an idle
// stream to one goroutine) and change the store first (`xdsd serve
// --watch`), and serves nothing stale: a stream that connects before the
// store's state is loaded waits for it like a subscription to a name that
// does not exist yet.
func New(st store.Store, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Protocol.Logger = o.Logger
	o.Protocol.Registerer = o.Registerer
	d := db.New(db.Hooks{})
	return &Server{store: st, db: d, proto: protocol.NewServer(d, o.Protocol), log: o.Logger,
		cancel: func() {}, stopped: make(chan struct{}), revCond: make(chan struct{})}
}

// Start follows the store on a goroutine of its own: it loads the store's
// state into the db, then each committed change, until Close, or until
// the store closes or fails (Stopped, Err). Calls after the first do
// nothing.
func (s *Server) Start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.mu.Lock()
		s.cancel = cancel
		s.mu.Unlock()
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			s.watchStage(ctx)
		}()
		go func() {
			defer close(s.stopped)
			s.follow(ctx)
			<-watched
		}()
	})
}

// Register registers every xDS service, and CSDS, on g.
func (s *Server) Register(g *grpc.Server) { s.proto.Register(g) }

// Close ends every downstream stream (see protocol.Server.Close) and stops
// following the store, waiting until it has stopped: the store can be
// closed after it.
func (s *Server) Close() {
	s.proto.Close()
	s.startOnce.Do(func() { close(s.stopped) }) // never started: nothing to wait for
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	cancel()
	<-s.stopped
	s.end(errServerClosed, nil) // (when it was never started)
}

// DB is the server's subscription database.
func (s *Server) DB() *db.DB { return s.db }

// Ready reports whether the store's state has been loaded.
func (s *Server) Ready() bool { return s.ready.Load() }

// Streams reports the connected streams.
func (s *Server) Streams() []protocol.StreamStatus { return s.proto.Streams() }

// Protocol is the downstream engine, which holds the fleet index (the
// admin API's readers ask it: groups, who a change concerns).
func (s *Server) Protocol() *protocol.Server { return s.proto }

// Stopped is closed when the server has stopped following its store:
// after Close, or when the store closed or failed (Err says which).
func (s *Server) Stopped() <-chan struct{} { return s.stopped }

// Err is the failure that stopped the server following its store: nil
// while it follows, and when Close or the store's own Close ended it.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// follow loads the store's state into the db and then follows its changes
// until ctx ends or the store closes or fails. Each store change set
// reaches the db as one update, so every batch reaches each subscriber
// whole.
func (s *Server) follow(ctx context.Context) {
	w := store.Watch(s.store, store.FromStart)
	for {
		cs, err := w.Next(ctx)
		switch {
		case ctx.Err() != nil:
			s.end(errServerClosed, nil)
			return
		case errors.Is(err, store.ErrClosed):
			s.end(err, nil) // its owner closed it: an end, not a failure
			return
		case err != nil:
			s.log.Error("the server stopped following its store", "error", err)
			s.end(err, err)
			return
		}
		s.db.Update(db.Update{Rev: cs.Rev, Reset: cs.Reset, Puts: cs.Puts, Deletes: cs.Deletes, Stage: s.stageAt(ctx, cs.Rev)})
		if !s.ready.Swap(true) {
			s.log.Info("store loaded", "revision", cs.Rev, "variants", len(cs.Puts))
		}
		s.mu.Lock()
		s.rev = cs.Rev
		close(s.revCond)
		s.revCond = make(chan struct{})
		s.mu.Unlock()
	}
}

// end records why following ended (the first reason only) and wakes
// every WaitRev.
func (s *Server) end(why, failure error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.why != nil {
		return
	}
	s.why, s.err = why, failure
	close(s.revCond)
}

// WaitRev blocks until the db holds revision rev or later. It fails when
// ctx ends, and when the server has stopped following its store without
// reaching rev (ErrStopped, with the reason).
func (s *Server) WaitRev(ctx context.Context, rev int64) error {
	for {
		s.mu.Lock()
		cur, ch, why := s.rev, s.revCond, s.why
		s.mu.Unlock()
		if cur >= rev && s.ready.Load() {
			return nil
		}
		if why != nil {
			return fmt.Errorf("revision %d: %w: %w", rev, ErrStopped, why)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
