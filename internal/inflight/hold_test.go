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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsd/xdsd/internal/testutil/testpki"
)

// holder Holds each message it receives in the connection's bound, and
// Releases it at once unless it begins with 'k' (kept until the stream
// ends, as a handler still working on it would): the xDS streams' use.
func holder(_ any, ss grpc.ServerStream) error {
	c := ForContext(ss.Context())
	p, _ := peer.FromContext(ss.Context())
	_, isTLS := p.AuthInfo.(credentials.TLSInfo)
	if c == nil {
		return status.Error(codes.Internal, "no connection found for the handler's context")
	}
	var kept int64
	defer func() { c.Release(kept) }()
	for {
		m := new(wrapperspb.BytesValue)
		if err := ss.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		n := int64(len(m.Value))
		if err := c.Hold(n); err != nil {
			c.Release(n)
			return status.Error(codes.ResourceExhausted, err.Error())
		}
		if m.Value[0] == 'k' {
			kept += n
		} else {
			c.Release(n)
		}
		a := uint64(n)
		if isTLS {
			a |= 1 << 63
		}
		if err := ss.SendMsg(wrapperspb.UInt64(a)); err != nil {
			return err
		}
	}
}

// holdServer serves holder behind Creds, and stops (closing its
// connections) when the test ends; it then checks no connection is left
// registered.
func holdServer(t *testing.T, inner credentials.TransportCredentials) (string, *lockedBuffer, Options) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	o := Options{Limit: testLimit, Setting: "--max-connection-request-bytes", Logger: slog.New(slog.NewTextHandler(logs, nil)), Refused: RefusedCounter()}
	g := grpc.NewServer(grpc.Creds(Creds(inner, o)), grpc.MaxRecvMsgSize(testMaxMsg), grpc.UnknownServiceHandler(holder))
	go g.Serve(lis)
	t.Cleanup(func() {
		g.Stop()
		n := 0
		conns.Range(func(k, _ any) bool { n++; return true })
		if n != 0 {
			t.Errorf("%d connections still registered after the server stopped", n)
		}
	})
	return lis.Addr().String(), logs, o
}

// sendAll sends msgs on a new stream of a real gRPC client, each answered
// before the next, and checks the handler saw TLS when wantTLS, then
// ends the stream and waits for the handler to return; it returns the
// first error.
func sendAll(t *testing.T, cc *grpc.ClientConn, wantTLS bool, msgs ...[]byte) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, echoPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := st.SendMsg(&wrapperspb.BytesValue{Value: m}); err != nil {
			// The stream's status says why.
			return st.RecvMsg(new(wrapperspb.UInt64Value))
		}
		got := new(wrapperspb.UInt64Value)
		if err := st.RecvMsg(got); err != nil {
			return err
		}
		if isTLS := got.Value>>63 == 1; isTLS != wantTLS {
			t.Errorf("the handler's AuthInfo is TLSInfo: %v, want %v", isTLS, wantTLS)
		}
	}
	// Until the handler has returned (its status follows its Release).
	st.CloseSend()
	if err := st.RecvMsg(new(wrapperspb.UInt64Value)); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// dialHold is a client of holdServer's.
func dialHold(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Requests a handler holds count in the limit with those arriving: two
// kept requests of 900 KiB fit in 2 MiB, again and again on one
// connection as the streams that kept them end, and a third closes the
// connection, logged and counted; released ones, however many, never do. Over
// plaintext and TLS, where the handler's AuthInfo stays TLSInfo.
func TestHeldRequestsCount(t *testing.T) {
	ca := testpki.NewCA(t, "inflight test CA")
	leaf := ca.Leaf(t, testpki.LeafOpts{Server: true})
	for _, tc := range []struct {
		name           string
		server, client credentials.TransportCredentials
	}{
		{"plaintext", nil, insecure.NewCredentials()},
		{"TLS", credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{leaf.TLS}}), credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, logs, o := holdServer(t, tc.server)
			isTLS := tc.server != nil
			kept := bytes.Repeat([]byte{'k'}, 900<<10)
			released := bytes.Repeat([]byte{'r'}, 900<<10)
			// One connection: what a stream kept is released when it ends.
			cc := dialHold(t, addr, tc.client)
			if err := sendAll(t, cc, isTLS, released, released, released, released, released, released); err != nil {
				t.Fatalf("released requests: %v", err)
			}
			for range 3 {
				if err := sendAll(t, cc, isTLS, kept, kept); err != nil {
					t.Fatalf("two kept requests, within the limit: %v", err)
				}
			}
			err := sendAll(t, dialHold(t, addr, tc.client), isTLS, kept, kept, kept)
			if c := status.Code(err); c != codes.Unavailable && c != codes.ResourceExhausted {
				t.Fatalf("three kept requests, over the limit: %v, want the connection closed", err)
			}
			if got := testutil.ToFloat64(o.Refused); got != 1 {
				t.Errorf("refused counter %v, want 1", got)
			}
			if !strings.Contains(logs.String(), "had sent and were being handled") {
				t.Errorf("no log line for the connection closed:\n%s", logs)
			}
		})
	}
}
