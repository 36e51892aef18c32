// Package inflight bounds the request bytes one xDS connection can make
// the server hold while it reads them.
//
// gRPC holds a request whole while it arrives, and its flow control does
// not bound how many of them one connection sends at once: when a handler
// reads a message's 5-byte prefix, gRPC widens the stream's window to the
// whole announced length, and it gives the connection's window back as
// data arrives, not as it is used. So without this package one connection
// may make the server hold --max-streams-per-connection ×
// --max-msg-size bytes (1.6 GiB at the defaults; docs/security.md).
//
// Creds wraps the transport credentials of a gRPC server (TLS, or none)
// so that each connection's plaintext side — the HTTP/2 frames, after TLS
// — is read through a parser that follows, per stream, the gRPC messages
// being received. The bytes of the messages not yet complete, summed over
// the connection's streams, may not pass Options.Limit: the read that
// would pass it closes the connection instead of handing the bytes to
// gRPC, so the server never holds them.
//
// A complete request is the handler's: a handler that holds requests
// while it works on them (the xDS streams': rate limiter, decoding,
// applying) counts them on the same bound, with Hold and Release on the
// connection ForContext finds. Services that never Hold (health, CSDS,
// reflection) are counted only while their requests arrive, as before.
package inflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
)

// DefaultLimit is Options.Limit's default, --max-connection-request-bytes':
// four requests of --max-msg-size's default (16 MiB) at once, or ten of
// the largest a real client sends (100,000 names of 60 bytes, about 6.3
// MiB, the most the default subscription limits take).
const DefaultLimit = 64 << 20

// Options configure the bound.
type Options struct {
	// Limit is how many bytes of requests being read one connection may
	// make the server hold (see parser for what is counted). One request
	// of Limit bytes always fits. Zero or less: DefaultLimit.
	Limit int64
	// Setting names the limit in the log line and the error of a
	// connection that passes it: "--max-connection-request-bytes", or an
	// options field for a Go program.
	Setting string
	// Logger receives a line for each connection closed. Nil:
	// slog.Default().
	Logger *slog.Logger
	// Refused, when set, counts the connections closed.
	Refused prometheus.Counter
}

// RefusedCounter is the metric of connections closed by the bound, to be
// registered by the program and passed as Options.Refused.
func RefusedCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "xdsd_connection_request_bytes_refused_total",
		Help: "xDS connections closed because the requests they were sending, not yet complete, passed --max-connection-request-bytes."})
}

// Creds returns inner (nil: plaintext) with the bound on every connection
// a server accepts. The client side is inner's, unchanged.
func Creds(inner credentials.TransportCredentials, o Options) credentials.TransportCredentials {
	if inner == nil {
		inner = insecure.NewCredentials()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Limit <= 0 {
		o.Limit = DefaultLimit
	}
	return &creds{TransportCredentials: inner, o: o}
}

type creds struct {
	credentials.TransportCredentials
	o Options
}

// ServerHandshake wraps the connection inner's handshake returns: the
// parser sees the HTTP/2 frames, decrypted.
func (c *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	cn := &Conn{Conn: conn, p: newParser(c.o.Limit), o: &c.o, key: connKey(conn.LocalAddr(), conn.RemoteAddr())}
	cn.p.ends = &cn.ends
	cn.p.handled = &cn.handled
	return cn, info, nil
}

// conns finds a connection from its handlers' context (ForContext): by
// both ends' addresses, which gRPC gives a handler (peer.Peer) and which
// tell live TCP connections apart. A registry, rather than a value in
// the AuthInfo, keeps AuthInfo the inner credentials' own (code asserts
// it to be credentials.TLSInfo).
var conns sync.Map // connKey → *Conn

// connKey is "" for connections whose addresses may be shared (pipes,
// Unix sockets): those are not registered, so their handlers' requests
// are not counted rather than counted on another connection.
func connKey(local, remote net.Addr) string {
	_, lt := local.(*net.TCPAddr)
	_, rt := remote.(*net.TCPAddr)
	if !lt || !rt {
		return ""
	}
	return local.String() + " " + remote.String()
}

// ForContext returns the connection of a gRPC handler's context, or nil
// when it has no bound (a server without Creds, a connection not over
// TCP). Hold and Release of a
// nil *Conn do nothing.
func ForContext(ctx context.Context) *Conn {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	k := connKey(p.LocalAddr, p.Addr)
	if k == "" {
		return nil
	}
	if c, ok := conns.Load(k); ok {
		return c.(*Conn)
	}
	return nil
}

// Hold counts n bytes of a complete request that a handler of the
// connection holds, until it calls Release(n): in the same bound as the
// requests still arriving, so that a client cannot make the server hold
// more by finishing them. One request alone always fits (the bound is at
// least --max-msg-size). When the sum passes the limit the connection is
// closed, and Hold returns an error wrapping ErrOverLimit.
func (c *Conn) Hold(n int64) error {
	if c == nil {
		return nil
	}
	held := c.handled.Add(n)
	if total := held + c.incomplete.Load(); total > c.p.max && held > n {
		c.fail(total)
		return fmt.Errorf("%w: %d bytes, over %d (%s)", ErrOverLimit, total, c.o.Limit, c.o.Setting)
	}
	if c.closed.Load() {
		return ErrOverLimit
	}
	return nil
}

// Release ends the count of n bytes Hold began.
func (c *Conn) Release(n int64) {
	if c != nil {
		c.handled.Add(-n)
	}
}

// Close closes the connection and forgets it.
func (c *Conn) Close() error {
	c.gone.Store(true)
	conns.CompareAndDelete(c.key, c)
	return c.Conn.Close()
}

// register puts the connection in conns, on its first read: gRPC reads a
// connection once its transport is set up, and from then on closes it
// when the transport ends (an error before that closes the connection
// under the handshake instead, which would leave the entry behind).
func (c *Conn) register() {
	c.registered = true
	if c.key == "" {
		return
	}
	conns.Store(c.key, c)
	if c.gone.Load() { // closed meanwhile
		conns.CompareAndDelete(c.key, c)
	}
}

func (c *creds) Clone() credentials.TransportCredentials {
	return &creds{TransportCredentials: c.TransportCredentials.Clone(), o: c.o}
}

// Conn is a server connection whose reads are counted. gRPC reads a
// connection from one goroutine at a time, so the parser needs no lock;
// what it learns from the writes (ends) is handed over under one.
type Conn struct {
	net.Conn
	p    *parser
	o    *Options
	key  string // in conns
	ends ends
	// closed: the connection passed the limit (Read, Hold); gone: Close
	// was called.
	closed, gone atomic.Bool
	registered   bool // in conns (the reader's)
	// handled is what handlers Hold; incomplete the parser's count, as of
	// its last read, for Hold to check against.
	handled, incomplete atomic.Int64
}

// Write writes to the connection and notes the streams the server ends
// in what it wrote.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.ends.feed(b[:n])
	return n, err
}

// ends follows the frames the server writes for the streams it ends:
// trailers (HEADERS with END_STREAM) and RST_STREAM. gRPC holds nothing
// more of such a stream, and its client may stop sending on it
// mid-message without ending it from its side (it need not: the stream
// is closed), so the reader forgets its message.
type ends struct {
	mu   sync.Mutex
	hdr  [9]byte
	nh   int
	hr   bytes.Reader
	left uint32   // payload bytes of the frame being written still to skip
	ids  []uint32 // streams ended since the reader last took them
}

func (e *ends) feed(b []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(b) > 0 {
		if e.left > 0 {
			k := min(e.left, uint32(len(b)))
			e.left -= k
			b = b[k:]
			continue
		}
		k := copy(e.hdr[e.nh:], b)
		e.nh += k
		b = b[k:]
		if e.nh < len(e.hdr) {
			return
		}
		e.nh = 0
		e.hr.Reset(e.hdr[:])
		fh, err := http2.ReadFrameHeader(&e.hr)
		if err != nil { // cannot happen: nine bytes are there
			panic(err)
		}
		e.left = fh.Length
		if fh.Type == http2.FrameRSTStream || fh.Type == http2.FrameHeaders && fh.Flags.Has(http2.FlagHeadersEndStream) {
			e.ids = append(e.ids, fh.StreamID)
		}
	}
}

// take returns the streams ended since the last take, reusing buf.
func (e *ends) take(buf []uint32) []uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf = append(buf[:0], e.ids...)
	e.ids = e.ids[:0]
	return buf
}

// ErrOverLimit is what a read returns once the connection has passed the
// limit: the connection is closed.
var ErrOverLimit = errors.New("requests being read passed the connection's limit")

// Read reads from the connection and follows what it read; a read that
// takes the connection past the limit closes it and returns no bytes.
func (c *Conn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, ErrOverLimit
	}
	if !c.registered {
		c.register()
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		over := c.p.feed(b[:n])
		c.incomplete.Store(c.p.held)
		if over > 0 {
			c.fail(over)
			return 0, fmt.Errorf("%w: %d bytes, over %d (%s)", ErrOverLimit, over, c.o.Limit, c.o.Setting)
		}
	}
	return n, err
}

// fail closes the connection, which passed the limit with total bytes,
// once.
func (c *Conn) fail(total int64) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	// Counted and logged before the close, which the peer sees.
	if c.o.Refused != nil {
		c.o.Refused.Inc()
	}
	c.o.Logger.LogAttrs(context.Background(), slog.LevelWarn,
		"xDS connection closed: the requests it was sending, or had sent and were being handled, passed the limit of bytes a connection may make the server hold; raise "+c.o.Setting+" if a real client sends that much at once",
		slog.String("peer", c.Conn.RemoteAddr().String()), slog.Int64("bytes", total), slog.Int64("limit", c.o.Limit), slog.String("setting", c.o.Setting))
	c.Close()
}

// recordCost is what the parser counts for each stream with a message
// being read, on top of the message's bytes: its entry in streams. A
// client could otherwise make unbounded entries by starting a message,
// one prefix byte, on stream after stream.
const recordCost = 64

// msg is one stream's message being read.
type msg struct {
	prefix [5]byte // the gRPC prefix: compressed flag, 4-byte big-endian length
	np     uint8   // prefix bytes read
	need   uint32  // message bytes still to come, once the prefix is read
	have   int64   // message bytes read, counted in held
}

// parser follows the HTTP/2 frames a client sends, split across reads
// anywhere, and the gRPC messages in each stream's DATA.
//
// held counts the bytes of messages not yet complete (the prefix not
// included) and recordCost for each stream reading one. The check allows
// one record on top of the limit, so that a single request of Limit bytes
// always fits. A message's bytes stop counting when it is complete, or
// when its stream ends: the client's END_STREAM (on DATA or HEADERS) or
// RST_STREAM, or the server's trailers or RST_STREAM (ends).
type parser struct {
	max     int64 // limit plus one record
	held    int64
	preface int // bytes of the client preface still to skip

	hdr  [9]byte
	nh   int
	hr   bytes.Reader
	fh   http2.FrameHeader
	left uint32 // payload bytes of the frame still to come; frame in progress while inFrame
	// For the DATA frame in progress: padded until its pad length is
	// read; pad is how many of the last payload bytes are padding.
	inFrame, padded bool
	pad             uint32
	streams         map[uint32]msg

	// ends, when set, are the streams the server ended (Conn.Write).
	// Data the client still sends on them is not counted: gRPC drops
	// it. The last maxEnded are remembered; data on an older one counts
	// again, erring the strict way.
	ends  *ends
	taken []uint32
	// handled, when set, is what the connection's handlers hold
	// (Conn.Hold): it counts against the same limit.
	handled *atomic.Int64
	ended   map[uint32]struct{}
	eorder  []uint32 // ended, oldest first
}

// maxEnded is how many server-ended streams a parser remembers.
const maxEnded = 1024

func newParser(limit int64) *parser {
	return &parser{max: limit + recordCost, preface: len(http2.ClientPreface), streams: map[uint32]msg{}, ended: map[uint32]struct{}{}}
}

// serverEnded forgets the message of a stream the server ended, and
// remembers the stream.
func (p *parser) serverEnded(id uint32) {
	if m, ok := p.streams[id]; ok {
		p.held -= m.have + recordCost
		delete(p.streams, id)
	}
	if _, ok := p.ended[id]; ok {
		return
	}
	if len(p.eorder) == maxEnded {
		delete(p.ended, p.eorder[0])
		p.eorder = append(p.eorder[:0], p.eorder[1:]...)
	}
	p.ended[id] = struct{}{}
	p.eorder = append(p.eorder, id)
}

// feed follows b. It returns 0, or the bytes the connection would hold
// when they pass the limit; the parser is then of no further use.
func (p *parser) feed(b []byte) int64 {
	if p.ends != nil {
		p.taken = p.ends.take(p.taken)
		for _, id := range p.taken {
			p.serverEnded(id)
		}
	}
	for len(b) > 0 {
		if p.preface > 0 {
			k := min(p.preface, len(b))
			p.preface -= k
			b = b[k:]
			continue
		}
		if !p.inFrame {
			k := copy(p.hdr[p.nh:], b)
			p.nh += k
			b = b[k:]
			if p.nh < len(p.hdr) {
				return 0
			}
			p.nh = 0
			p.hr.Reset(p.hdr[:])
			fh, err := http2.ReadFrameHeader(&p.hr)
			if err != nil { // cannot happen: nine bytes are there
				panic(err)
			}
			p.fh, p.left, p.inFrame = fh, fh.Length, true
			p.padded = fh.Type == http2.FrameData && fh.Flags.Has(http2.FlagDataPadded)
			p.pad = 0
			if p.left == 0 {
				p.endFrame()
			}
			continue
		}
		if p.fh.Type != http2.FrameData {
			// HEADERS, CONTINUATION and the rest: skipped.
			k := min(p.left, uint32(len(b)))
			p.left -= k
			b = b[k:]
		} else if p.padded {
			p.pad = uint32(b[0])
			p.padded = false
			p.left--
			b = b[1:]
		} else if p.left > p.pad {
			k := min(p.left-p.pad, uint32(len(b)))
			if over := p.data(p.fh.StreamID, b[:k]); over > 0 {
				return over
			}
			p.left -= k
			b = b[k:]
		} else {
			k := min(p.left, uint32(len(b)))
			p.left -= k
			b = b[k:]
		}
		if p.left == 0 {
			p.endFrame()
		}
	}
	return 0
}

// endFrame ends the frame in progress: a stream it ends forgets its
// message.
func (p *parser) endFrame() {
	p.inFrame = false
	var end bool
	switch p.fh.Type {
	case http2.FrameData:
		end = p.fh.Flags.Has(http2.FlagDataEndStream)
	case http2.FrameHeaders:
		end = p.fh.Flags.Has(http2.FlagHeadersEndStream)
	case http2.FrameRSTStream:
		end = true
	}
	if end {
		if m, ok := p.streams[p.fh.StreamID]; ok {
			p.held -= m.have + recordCost
			delete(p.streams, p.fh.StreamID)
		}
	}
}

// others is what the connection's handlers hold.
func (p *parser) others() int64 {
	if p.handled == nil {
		return 0
	}
	return p.handled.Load()
}

// data follows d, the data of a DATA frame of stream id.
func (p *parser) data(id uint32, d []byte) int64 {
	if _, gone := p.ended[id]; gone {
		return 0
	}
	m, ok := p.streams[id]
	for len(d) > 0 {
		if !ok {
			if t := p.held + p.others() + recordCost; t > p.max {
				return t
			}
			m, ok = msg{}, true
			p.held += recordCost
		}
		if m.np < 5 {
			k := copy(m.prefix[m.np:], d)
			m.np += uint8(k)
			d = d[k:]
			if m.np == 5 {
				m.need = uint32(m.prefix[1])<<24 | uint32(m.prefix[2])<<16 | uint32(m.prefix[3])<<8 | uint32(m.prefix[4])
			}
		} else {
			k := min(m.need, uint32(len(d)))
			if t := p.held + p.others() + int64(k); t > p.max {
				return t
			}
			m.need -= k
			m.have += int64(k)
			p.held += int64(k)
			d = d[k:]
		}
		if m.np == 5 && m.need == 0 {
			// Complete: gRPC hands it to the handler.
			p.held -= m.have + recordCost
			delete(p.streams, id)
			ok = false
		}
	}
	if ok {
		p.streams[id] = m
	}
	return 0
}
