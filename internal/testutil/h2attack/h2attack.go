// Package h2attack is for tests only: one raw HTTP/2 connection that
// opens gRPC streams and sends on each most of a message it announces,
// never the rest, following the server's flow control. It is the attack
// on what a server holds of requests still being read (issue 27,
// internal/inflight), shared by the tests of the packages that carry the
// bound.
package h2attack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// ADSPath is the method the streams call: SotW ADS.
const ADSPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"

// State is what an attack did and saw.
type State struct {
	Sent  int64 // DATA bytes written
	Ended int   // streams the server ended
	// Answered is how many streams the server sent a message (DATA) on.
	Answered int
	Why      string // how one of them ended
	Closed   bool   // the server closed the connection
}

// State reports the attack's state now.
func (a *Attack) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state()
}

// state is State with a.mu held.
func (a *Attack) state() State {
	st := State{Sent: a.sent, Ended: len(a.ended), Answered: len(a.answered), Closed: a.readErr != nil || a.writeErr != nil}
	for _, w := range a.ended {
		st.Why = w
		break
	}
	return st
}

// Attack is one raw HTTP/2 connection that opens ADS streams and
// sends on each most of a gRPC message it announces, never the rest: what
// the server holds of requests still being read.
type Attack struct {
	fr *http2.Framer
	mu sync.Mutex
	// wake is signalled when the peer grants window or a stream ends.
	wake     *sync.Cond
	connWin  int64
	initWin  int64
	win      map[uint32]int64
	ended    map[uint32]string // stream → why it ended (RST code or grpc-status)
	answered map[uint32]bool   // streams the server sent DATA on
	goaway   string
	readErr  error
	writeErr error // the server closed the connection mid-write
	sent     int64 // DATA bytes written
	refused  int
	settings bool
}

// Run opens streams streams on one connection to addr and
// sends each a gRPC length prefix announcing announce bytes, then send
// bytes of it. It returns once every byte that could be sent was, or the
// deadline passed, with the attack still holding the connection open.
func Run(t testing.TB, addr string, streams int, announce, send int64) (*Attack, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return RunOn(t, c, addr, streams, announce, send)
}

// RunOn is Run on a connection of the caller's (TLS, say, negotiated
// with ALPN "h2"), to a server called addr.
func RunOn(t testing.TB, c net.Conn, addr string, streams int, announce, send int64) (*Attack, net.Conn) {
	t.Helper()
	return run(t, c, addr, ADSPath, streams, announce, send, nil)
}

// Complete opens streams streams on one connection to addr calling path
// (ADSPath, DeltaADSPath) and sends each the whole gRPC messages msgs,
// one stream after another, as fast as the server's flow control lets
// it: the attack on what a server holds of requests complete but not yet
// handled (each stream's are complete before the next's begin, so no
// more than one is ever incomplete). It returns once every byte was
// sent, or the deadline passed, with the connection still open.
func Complete(t testing.TB, addr, path string, streams int, msgs ...[]byte) (*Attack, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var framed []byte
	for _, m := range msgs {
		framed = append(framed, 0)
		framed = binary.BigEndian.AppendUint32(framed, uint32(len(m)))
		framed = append(framed, m...)
	}
	return run(t, c, addr, path, streams, 0, int64(len(framed))-5, framed)
}

// DeltaADSPath is the method of delta ADS streams.
const DeltaADSPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"

// run is RunOn calling path; framed, when set, is what each stream
// sends (send+5 bytes: messages with their prefixes), else a prefix
// announcing announce bytes and send zeros.
func run(t testing.TB, c net.Conn, addr, path string, streams int, announce, send int64, framed []byte) (*Attack, net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	a := &Attack{fr: http2.NewFramer(c, c), connWin: 65535, initWin: 65535, win: map[uint32]int64{}, ended: map[uint32]string{}, answered: map[uint32]bool{}}
	a.wake = sync.NewCond(&a.mu)
	a.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	// Our own receive window is large so that the server's answers never
	// block on us.
	if err := a.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := a.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	go a.read()

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	ids := make([]uint32, 0, streams)
	for i := 0; i < streams; i++ {
		id := uint32(2*i + 1)
		hb.Reset()
		for _, f := range [][2]string{
			{":method", "POST"}, {":scheme", "http"}, {":authority", addr},
			{":path", path},
			{"content-type", "application/grpc"}, {"te", "trailers"},
		} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		a.mu.Lock()
		a.win[id] = a.initWin
		err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		a.mu.Unlock()
		if err != nil {
			a.writeErr = err
			return a, c
		}
		ids = append(ids, id)
	}
	left := map[uint32]int64{}
	prefix := make([]byte, 5)
	binary.BigEndian.PutUint32(prefix[1:], uint32(announce))
	for _, id := range ids {
		left[id] = send + 5
	}
	chunk := make([]byte, 16384)
	deadline := time.Now().Add(3 * time.Minute)
	stop := time.AfterFunc(time.Until(deadline), func() { a.mu.Lock(); a.wake.Broadcast(); a.mu.Unlock() })
	defer stop.Stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(left) > 0 && a.readErr == nil && a.goaway == "" && time.Now().Before(deadline) {
		sent := false
		for _, id := range ids {
			n, ok := left[id]
			if !ok {
				continue
			}
			if _, done := a.ended[id]; done {
				delete(left, id)
				continue
			}
			m := min(n, int64(len(chunk)), a.win[id], a.connWin)
			if m <= 0 {
				if framed != nil {
					break
				}
				continue
			}
			buf := chunk[:m]
			if off := send + 5 - n; framed != nil {
				copy(buf, framed[off:])
			} else if off < 5 {
				// the length prefix first
				copy(buf, prefix[off:])
			}
			if err := a.fr.WriteData(id, false, buf); err != nil {
				a.writeErr = err
				return a, c
			}
			a.win[id] -= m
			a.connWin -= m
			a.sent += m
			left[id] = n - m
			if left[id] == 0 {
				delete(left, id)
			}
			sent = true
			if framed != nil {
				// Whole messages, one stream after another.
				break
			}
		}
		if !sent {
			a.wake.Wait()
		}
	}
	return a, c
}

// read answers the server's SETTINGS and PINGs and keeps the send
// windows.
func (a *Attack) read() {
	for {
		f, err := a.fr.ReadFrame()
		a.mu.Lock()
		if err != nil {
			a.readErr = err
			a.wake.Broadcast()
			a.mu.Unlock()
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
					d := int64(v) - a.initWin
					a.initWin = int64(v)
					for id := range a.win {
						a.win[id] += d
					}
				}
				a.fr.WriteSettingsAck()
				a.settings = true
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				a.connWin += int64(f.Increment)
			} else {
				a.win[f.StreamID] += int64(f.Increment)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				a.fr.WritePing(true, f.Data)
			}
		case *http2.DataFrame:
			a.answered[f.StreamID] = true
		case *http2.RSTStreamFrame:
			a.ended[f.StreamID] = "RST_STREAM " + f.ErrCode.String()
			if f.ErrCode == http2.ErrCodeRefusedStream {
				a.refused++
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				a.ended[f.StreamID] = fmt.Sprintf("grpc-status %s: %s", headerValue(f, "grpc-status"), headerValue(f, "grpc-message"))
			}
		case *http2.GoAwayFrame:
			a.goaway = f.ErrCode.String()
		}
		a.wake.Broadcast()
		a.mu.Unlock()
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.Fields {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// Wait waits until done is true of the attack's state, the connection
// is closed, or the deadline passes; it returns the last state seen.
func (a *Attack) Wait(d time.Duration, done func(State) bool) State {
	stop := time.AfterFunc(d, func() { a.mu.Lock(); a.wake.Broadcast(); a.mu.Unlock() })
	defer stop.Stop()
	deadline := time.Now().Add(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		st := a.state()
		if done(st) || st.Closed || !time.Now().Before(deadline) {
			return st
		}
		a.wake.Wait()
	}
}

// Closed waits until the server closes the connection, or the deadline
// passes; it says how the connection ended ("" if it was not).
func (a *Attack) Closed(d time.Duration) string {
	stop := time.AfterFunc(d, func() { a.mu.Lock(); a.wake.Broadcast(); a.mu.Unlock() })
	defer stop.Stop()
	deadline := time.Now().Add(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.readErr == nil && time.Now().Before(deadline) {
		a.wake.Wait()
	}
	if a.readErr == nil {
		return ""
	}
	return fmt.Sprintf("read: %v (write: %v, goaway %q)", a.readErr, a.writeErr, a.goaway)
}
