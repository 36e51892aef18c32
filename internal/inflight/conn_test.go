package inflight

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsd/xdsd/internal/testutil/testpki"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lockedBuffer is a log destination the server's goroutines write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	testLimit  = 2 << 20
	testMaxMsg = 1 << 20
	echoPath   = "/inflight.Test/Echo"
)

// echo answers each message of a stream with its length, and with
// whether the stream came over TLS, so the test sees that the wrapper
// kept the handshake's AuthInfo.
func echo(_ any, ss grpc.ServerStream) error {
	p, _ := peer.FromContext(ss.Context())
	_, isTLS := p.AuthInfo.(credentials.TLSInfo)
	for {
		m := new(wrapperspb.BytesValue)
		if err := ss.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := uint64(len(m.Value))
		if n == 0 {
			// An empty message ends the stream from the server's side.
			return status.Error(codes.FailedPrecondition, "ended by the server")
		}
		if isTLS {
			n |= 1 << 63
		}
		if err := ss.SendMsg(wrapperspb.UInt64(n)); err != nil {
			return err
		}
	}
}

type testServer struct {
	addr string
	logs *lockedBuffer
	o    Options
}

// startServer serves echo behind Creds(inner). Its windows are wide, so
// that the raw client below can send without following flow control: the
// bound must hold whatever the windows.
func startServer(t *testing.T, inner credentials.TransportCredentials) *testServer {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{addr: lis.Addr().String(), logs: &lockedBuffer{}}
	s.o = Options{Limit: testLimit, Setting: "--max-connection-request-bytes", Logger: slog.New(slog.NewTextHandler(s.logs, nil)), Refused: RefusedCounter()}
	g := grpc.NewServer(grpc.Creds(Creds(inner, s.o)), grpc.MaxRecvMsgSize(testMaxMsg), grpc.UnknownServiceHandler(echo),
		grpc.InitialWindowSize(64<<20), grpc.InitialConnWindowSize(64<<20))
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return s
}

// attack opens a connection (TLS when cfg is set), starts streams
// messages announcing testMaxMsg bytes and sends each part of them, never
// finishing, then a PING. It returns the connection's read error, or nil
// when the server answered the PING: it read everything before it and
// kept the connection.
func attack(t *testing.T, addr string, cfg *tls.Config, streams, send int) error {
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.Dial("tcp", addr, cfg)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Everything is written from its own goroutine: the server may close
	// the connection mid-write.
	written := make(chan struct{})
	go func() {
		defer close(written)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, nil)
		fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for i := range streams {
			hb.Reset()
			for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr}, {":path", echoPath},
				{"content-type", "application/grpc"}, {"te", "trailers"}} {
				enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndHeaders: true}) != nil {
				return
			}
		}
		m := prefix(testMaxMsg, 'a')[:send+5]
		for i := range streams {
			for d := m; len(d) > 0; d = d[min(len(d), 16384):] {
				if fr.WriteData(uint32(2*i+1), false, d[:min(len(d), 16384)]) != nil {
					return
				}
			}
		}
		fr.WritePing(false, pingData)
	}()
	defer func() { <-written }()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	fr := http2.NewFramer(nil, c)
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errNoAnswer
		}
		if err != nil {
			return err
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == pingData {
			return nil
		}
	}
}

// errNoAnswer is attack's error when the server neither answered nor
// closed the connection.
var errNoAnswer = errors.New("the server neither answered the PING nor closed the connection")

var pingData = [8]byte{'i', 'n', 'f', 'l', 'i', 'g', 'h', 't'}

// served sends n messages of size bytes on one stream of a real gRPC
// client, and checks each is answered.
func served(t *testing.T, addr string, creds credentials.TransportCredentials, n, size int, wantTLS bool) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, echoPath)
	if err != nil {
		t.Fatal(err)
	}
	msg := &wrapperspb.BytesValue{Value: bytes.Repeat([]byte{'n'}, size)}
	for range n {
		if err := st.SendMsg(msg); err != nil {
			t.Fatalf("send: %v", err)
		}
		got := new(wrapperspb.UInt64Value)
		if err := st.RecvMsg(got); err != nil {
			t.Fatalf("a normal client on its own connection: %v", err)
		}
		if isTLS := got.Value&(1<<63) != 0; isTLS != wantTLS || got.Value&^(1<<63) != uint64(size) {
			t.Fatalf("answered %d (TLS %v), want %d (TLS %v)", got.Value&^(1<<63), isTLS, size, wantTLS)
		}
	}
	st.CloseSend()
}

// A connection whose unfinished requests pass the limit is closed, said
// in a log line and counted, while a client on another connection —
// sending messages of the largest size, many times the limit in all — is
// served; a connection that stays within the limit is kept. Over
// plaintext and TLS: the bound reads the frames after TLS.
func TestConnectionOverLimitClosed(t *testing.T) {
	ca := testpki.NewCA(t, "inflight test CA")
	leaf := ca.Leaf(t, testpki.LeafOpts{Server: true})
	for _, tc := range []struct {
		name     string
		server   credentials.TransportCredentials
		client   credentials.TransportCredentials
		attackTL *tls.Config
	}{
		{"plaintext", nil, insecure.NewCredentials(), nil},
		{"TLS", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLS}}),
			credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}), &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, tc.server)
			// Four streams of 900 KiB each: 3.6 MiB, over the 2 MiB limit.
			var wg sync.WaitGroup
			var attackErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				attackErr = attack(t, s.addr, tc.attackTL, 4, 900<<10)
			}()
			served(t, s.addr, tc.client, 8, testMaxMsg-16, tc.attackTL != nil)
			wg.Wait()
			if attackErr == nil || attackErr == errNoAnswer {
				t.Fatalf("the connection over the limit was kept open (%v)", attackErr)
			}
			if got := testutil.ToFloat64(s.o.Refused); got != 1 {
				t.Errorf("refused counter %v, want 1", got)
			}
			logs := s.logs.String()
			for _, want := range []string{"xDS connection closed", "peer=127.0.0.1:", "limit=2097152", "setting=--max-connection-request-bytes"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %q:\n%s", want, logs)
				}
			}
			// Within the limit: two streams of 900 KiB are kept.
			if err := attack(t, s.addr, tc.attackTL, 2, 900<<10); err != nil {
				t.Errorf("a connection within the limit was closed: %v", err)
			}
			if got := testutil.ToFloat64(s.o.Refused); got != 1 {
				t.Errorf("refused counter %v after a connection within the limit, want 1", got)
			}
		})
	}
}

// A stream the server ends stops counting: stream 1 sends an empty
// message, which its handler answers by ending the stream, and 1,020 KiB
// of another message it never finishes; once the server's trailers for
// it are read, streams 3 and 5 send 1,020 and 200 KiB of messages and the
// connection is kept, though the three together pass the 2 MiB limit.
func TestServerEndedStreamForgotten(t *testing.T) {
	s := startServer(t, nil)
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", s.addr}, {":path", echoPath},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	send := func(id uint32, d []byte) {
		for ; len(d) > 0; d = d[min(len(d), 16384):] {
			if err := fr.WriteData(id, false, d[:min(len(d), 16384)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	send(1, append(prefix(0, 0), prefix(testMaxMsg, 'a')[:1020<<10]...))
	for ended := false; !ended; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("before the server ended stream 1: %v", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			ended = f.StreamID == 1 && f.StreamEnded()
		case *http2.RSTStreamFrame:
			ended = f.StreamID == 1
		}
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndHeaders: true})
	send(3, prefix(testMaxMsg, 'b')[:1020<<10])
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: hb.Bytes(), EndHeaders: true})
	send(5, prefix(testMaxMsg, 'c')[:200<<10])
	fr.WritePing(false, pingData)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection was closed: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == pingData {
			break
		}
	}
	if got := testutil.ToFloat64(s.o.Refused); got != 0 {
		t.Errorf("refused counter %v, want 0", got)
	}
}
