package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/inflight"
	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/tuning"
	"github.com/xdsd/xdsd/resource"
)

// Store is where a server's resources live. It is opaque: pick one with
// MemoryStore or OpenBolt, hand it to Options.Store, and change it only
// through Server.Apply.
type Store struct{ st store.Store }

// MemoryStore returns a store that lives in memory: lost when the program
// ends, which suits a program that rebuilds its configuration at start
// from its own source of truth.
func MemoryStore() *Store { return &Store{st: mem.New()} }

// OpenBolt opens (creating it if needed) a bbolt file at path: every
// applied batch is durable, and a restarted server serves the same
// versions, so its clients re-download nothing. One process at a time may
// hold the file; OpenBolt waits a second for another one, then fails.
func OpenBolt(path string) (*Store, error) {
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return nil, err
	}
	return &Store{st: st}, nil
}

// Close releases the store. Close the server first.
func (s *Store) Close() error { return s.st.Close() }

// Options configure a Server. The zero value is a server of a new
// in-memory store with the default limits.
type Options struct {
	// Store holds the resources. Nil means a new MemoryStore, closed with
	// the server; a store passed here stays open until its owner closes it.
	Store *Store
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the xdsd_* metrics (none when nil).
	Registerer prometheus.Registerer
	// MaxSubscriptions bounds the names one stream may subscribe to, all
	// types together (default 100000).
	MaxSubscriptions int
	// RequestRate is the sustained requests per second one stream may send
	// and RequestBurst the burst above it (defaults 100/s and 1000); a
	// stream above them is slowed down, not closed.
	RequestRate  float64
	RequestBurst int
	// MaxSubscriptionBytes bounds the memory of one stream's subscriptions
	// (and the resource versions a reconnecting delta client declares), as
	// an estimate of the heap they hold: about 1,100 bytes a name plus 4 a
	// byte of it (default 128 MiB, 100,000 names of up to about 60 bytes).
	// MaxConnectionSubscriptionBytes bounds the same for all the streams of
	// one connection together (default 256 MiB). A request that would pass
	// either is refused whole and its stream ends with RESOURCE_EXHAUSTED,
	// naming the limit; Registerer counts the refusals
	// (xdsd_subscription_bytes_refused_total). Zero means the default.
	MaxSubscriptionBytes           int64
	MaxConnectionSubscriptionBytes int64
	// MaxConnectionRequestBytes bounds the bytes of requests that one
	// connection has begun and not finished, or sent and not yet had
	// handled, all its streams together (default 64 MiB; zero means the
	// default). gRPC holds a request whole
	// while it arrives and lets every stream of a connection send one at
	// once, so without it a connection may hold as many messages of the
	// gRPC server's MaxRecvMsgSize as it has streams. A connection that
	// passes it is closed, logged and counted
	// (xdsd_connection_request_bytes_refused_total). Keep it at least the
	// gRPC server's MaxRecvMsgSize (4 MiB by default), or a request of that
	// size is never read. Serve applies it; a program that Registers the
	// server on its own gRPC server applies it with TransportCredentials.
	MaxConnectionRequestBytes int64
	// TuneGC lets Apply steer the process's GOGC, as `xdsd serve` does:
	// while the store holds a batch, and until it is served, GOGC is 25
	// (unless set lower), then what it was. A large batch is live twice
	// then (the store's transaction and what the server serves), and with
	// the default GOGC a server took 3.2 times the batch's size. Off by
	// default: GOGC is the whole program's, not the server's.
	TuneGC bool
}

// Server is an xDS management server embedded in a Go program: what is
// applied to it (Apply, Follow) is served to every xDS client — Envoy,
// gRPC, the client package — over SotW and delta, ADS or per type, with
// TP1 names and TP2 variants.
type Server struct {
	core     *origin.Server
	st       store.Store
	ownStore bool
	log      *slog.Logger
	memory   *tuning.Memory // nil unless Options.TuneGC
	inflight inflight.Options

	mu     sync.Mutex
	grpcs  []*grpc.Server // made by Serve
	closed bool
}

// New starts a server of o.Store and returns once the store's state is
// loaded, so that a client that connects at once sees it. ctx bounds that
// load only, not the server's life: New fails when ctx ends first, and at
// once when the store cannot be read (it was closed, say). The server
// serves nothing until it is registered on a gRPC server (Register) or
// given a listener (Serve). Close it when done.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{log: o.Logger, inflight: inflight.Options{Limit: o.MaxConnectionRequestBytes,
		Setting: "server.Options.MaxConnectionRequestBytes", Logger: o.Logger, Refused: inflight.RefusedCounter()}}
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.inflight.Refused)
	}
	if o.TuneGC {
		s.memory = tuning.Process()
	}
	if o.Store == nil {
		s.st, s.ownStore = mem.New(), true
	} else {
		s.st = o.Store.st
	}
	s.core = origin.New(s.st, origin.Options{Logger: o.Logger, Registerer: o.Registerer,
		Protocol: protocol.Options{MaxSubscriptions: o.MaxSubscriptions, RequestRate: o.RequestRate, RequestBurst: o.RequestBurst,
			MaxSubscriptionBytes: o.MaxSubscriptionBytes, MaxConnSubscriptionBytes: o.MaxConnectionSubscriptionBytes}})
	s.core.Start()
	if err := s.core.WaitRev(ctx, s.st.Rev()); err != nil {
		s.Close()
		return nil, fmt.Errorf("server: loading the store: %w", err)
	}
	return s, nil
}

// GRPCServerOptions are the options a gRPC server must be created with to
// carry a Server's (or a relay's) streams: they let responses be sent as
// encoded once for all the clients that get them, and keep an idle stream
// to one goroutine.
func GRPCServerOptions() []grpc.ServerOption {
	return protocol.ServerOptions()
}

// Register adds the xDS services (ADS and the per-type SotW and delta
// services) to g, a gRPC server created with GRPCServerOptions, so that a
// program can serve xDS next to its own services.
func (s *Server) Register(g *grpc.Server) { s.core.Register(g) }

// TransportCredentials returns creds (nil: plaintext) with the bound of
// Options.MaxConnectionRequestBytes on every connection a gRPC server
// made with them accepts: it reads each connection's HTTP/2 frames, after
// TLS, and closes a connection whose requests not yet complete pass the
// bound. Give them to the gRPC server Register is given:
// grpc.NewServer(append(server.GRPCServerOptions(),
// grpc.Creds(s.TransportCredentials(tlsCreds)))...). The client side is
// creds', unchanged.
func (s *Server) TransportCredentials(creds credentials.TransportCredentials) credentials.TransportCredentials {
	return inflight.Creds(creds, s.inflight)
}

// Serve serves xDS on lis until Close, on a gRPC server of its own, in
// plaintext, with Options.MaxConnectionRequestBytes. It returns nil after
// Close.
func (s *Server) Serve(lis net.Listener) error {
	g := grpc.NewServer(append(GRPCServerOptions(), grpc.Creds(s.TransportCredentials(nil)))...)
	s.Register(g)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		lis.Close()
		return nil
	}
	s.grpcs = append(s.grpcs, g)
	s.mu.Unlock()
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Close ends every stream, stops what Serve serves, and closes the store
// when the server made it.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	gs := s.grpcs
	s.mu.Unlock()
	s.core.Close()
	for _, g := range gs {
		g.Stop()
	}
	if s.ownStore {
		return s.st.Close()
	}
	return nil
}

// Batch is one atomic change: all of it is served, or none of it is.
// Putting a (type, name) replaces every variant of that resource, so a set
// of TP2 variants changes as a whole.
type Batch struct {
	Puts    []*resource.Variant
	Deletes []Delete
}

// Delete removes one variant of a resource, or all of them.
type Delete struct {
	Type string // type URL, e.g. resource.ClusterURL
	Name string
	// All deletes every variant; otherwise only the variant whose
	// constraints are Constraints (the zero value: the unconstrained one).
	All         bool
	Constraints constraint.Constraints
}

// Put adds a resource to the batch: m, named name, selected by the TP2
// constraints c (none: the unconstrained variant; several: the And of
// them). The type is m's. Put checks what `xdsd apply` checks of a
// document — the name's syntax for the type, m's own validation rules —
// and fills m's name field when it is empty; it fails, saying why, and
// adds nothing, otherwise.
func (b *Batch) Put(name string, m proto.Message, c ...constraint.Constraints) error {
	t := resource.ForURL(resource.TypePrefix + string(proto.MessageName(m)))
	if t == nil || !t.Known {
		return fmt.Errorf("put %s: %s is not an xDS resource type", name, proto.MessageName(m))
	}
	cname, err := resource.CheckName(t, name)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", t, name, err)
	}
	if t.NameField != "" {
		switch own := t.NameOf(m); own {
		case "":
			m = proto.Clone(m)
			t.SetNameOf(m, name)
		case name, cname:
		default:
			return fmt.Errorf("put %s %s: the message is named %q", t, name, own)
		}
	}
	if errs := resource.Validate(m); len(errs) > 0 {
		return fmt.Errorf("put %s %s: %s: %s", t, name, errs[0].Path, errs[0].Msg)
	}
	body, err := resource.Marshal(m)
	if err != nil {
		return fmt.Errorf("put %s %s: %w", t, name, err)
	}
	var cs constraint.Constraints
	if len(c) > 0 {
		cs = constraint.And(c...)
	}
	b.Puts = append(b.Puts, resource.NewVariant(t, cname, cs, "", t.URL, body))
	return nil
}

// Result says what an Apply changed.
type Result struct {
	// Rev is the store revision the batch made, or the current one when
	// it changed nothing. Every variant the batch changed is served with
	// version Rev (unconstrained) or Rev-<hash of its constraints> (TP2),
	// the versions `xdsd apply` gives.
	Rev     int64
	Puts    []resource.Key // variants created or changed
	Deletes []resource.Key // variants removed
}

// Apply applies b atomically, with the checks `xdsd apply` makes: a batch
// that names a variant twice, both puts and deletes a resource, or leaves
// a resource whose variants break TP2's rules (overlapping constraints, a
// key set that differs between variants) is rejected whole, every problem
// listed, and nothing changes. A batch equal to what is served makes no
// revision. When Apply returns, the change is being sent to the clients.
func (s *Server) Apply(ctx context.Context, b Batch) (Result, error) {
	sb := store.Batch{Puts: b.Puts}
	for _, d := range b.Deletes {
		sb.Deletes = append(sb.Deletes, store.Delete{Type: d.Type, Name: d.Name, All: d.All, Constraints: d.Constraints.Key()})
	}
	gc := s.memory.Begin(true) // (the batch is built: nothing is left to decode)
	defer gc.End()
	r, err := s.st.Apply(ctx, sb)
	if err != nil {
		return Result{}, err
	}
	if err := s.core.WaitRev(ctx, r.Rev); err != nil {
		return Result{}, err
	}
	return Result{Rev: r.Rev, Puts: r.Puts, Deletes: r.Deletes}, nil
}
