package origin

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
)

// Options configure a Server.
type Options struct {
	Protocol   protocol.Options
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Server serves a store's contents over xDS.
type Server struct {
	store store.Store
	db    *db.DB
	proto *protocol.Server
	log   *slog.Logger
	ready atomic.Bool

	mu      sync.Mutex
	rev     int64
	revCond chan struct{} // closed when rev advances
}

// New returns a server of st. Call Run to follow the store, and Register to
// serve on a gRPC server created with protocol.ServerOptions() (at least
// protocol.ServerCodec(); ServerOptions also keeps an idle stream to one
// goroutine).
func New(st store.Store, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Protocol.Logger = o.Logger
	o.Protocol.Registerer = o.Registerer
	d := db.New(db.Hooks{})
	return &Server{store: st, db: d, proto: protocol.NewServer(d, o.Protocol), log: o.Logger, revCond: make(chan struct{})}
}

// Register registers every xDS service on g.
func (s *Server) Register(g *grpc.Server) { s.proto.Register(g) }

// Close ends every downstream stream (see protocol.Server.Close).
func (s *Server) Close() { s.proto.Close() }

// DB is the server's subscription database.
func (s *Server) DB() *db.DB { return s.db }

// Ready reports whether the store's state has been loaded.
func (s *Server) Ready() bool { return s.ready.Load() }

// Clients reports the connected streams.
func (s *Server) Clients() []protocol.Client { return s.proto.Clients() }

// Protocol is the downstream engine, which holds the fleet index (the
// admin API's readers ask it: groups, who a change concerns).
func (s *Server) Protocol() *protocol.Server { return s.proto }

// Run loads the store's state into the db and then follows its changes until
// ctx ends or the store closes. Each store change set reaches the db as one
// update, so every batch reaches each subscriber whole.
func (s *Server) Run(ctx context.Context) error {
	w := store.Watch(s.store, store.FromStart)
	for {
		cs, err := w.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClosed) {
				return nil
			}
			return err
		}
		s.db.Update(db.Update{Rev: cs.Rev, Reset: cs.Reset, Puts: cs.Puts, Deletes: cs.Deletes})
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

// WaitRev blocks until the db holds revision rev or later.
func (s *Server) WaitRev(ctx context.Context, rev int64) error {
	for {
		s.mu.Lock()
		cur, ch := s.rev, s.revCond
		s.mu.Unlock()
		if cur >= rev && s.ready.Load() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
