package protocol

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/testutil"
	"github.com/xdsd/xdsd/internal/testutil/storetest"
	"github.com/xdsd/xdsd/resource"
)

// scriptedStream is a grpc.ServerStream whose requests a test hands over one
// at a time, and whose sends fail once failSends is closed.
type scriptedStream struct {
	ctx       context.Context
	reqs      chan []byte
	end       chan struct{} // closed: every later RecvMsg ends the stream
	failSends chan struct{}
}

func (s *scriptedStream) SetHeader(metadata.MD) error  { return nil }
func (s *scriptedStream) SendHeader(metadata.MD) error { return nil }
func (s *scriptedStream) SetTrailer(metadata.MD)       {}
func (s *scriptedStream) Context() context.Context     { return s.ctx }
func (s *scriptedStream) SendMsg(any) error {
	select {
	case <-s.failSends:
		return errors.New("transport closing")
	default:
		return nil
	}
}
func (s *scriptedStream) RecvMsg(m any) error {
	select {
	case b := <-s.reqs:
		m.(*rawRequest).b = b
		return nil
	case <-s.end:
		return io.EOF
	}
}

// A stream that ends (its send failed) while its receiving side still
// reads a request (one the transport had buffered) must not subscribe
// anything after it has unsubscribed everything: the subscription would
// outlive the stream, and a relay would follow it upstream forever.
func TestNoSubscriptionOutlivesItsStream(t *testing.T) {
	var (
		mu       sync.Mutex
		interest = map[db.Key]bool{}
	)
	d := db.New(db.Hooks{Interest: func(i db.Sub, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			interest[i.Key] = true
		} else {
			delete(interest, i.Key)
		}
	}})
	d.Update(db.Update{Rev: 1, Puts: []*resource.Variant{storetest.Route("a", "", "x").WithVersion("1")}})
	srv := NewServer(d, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	before := goleak.IgnoreCurrent()
	ss := &scriptedStream{ctx: context.Background(), reqs: make(chan []byte), end: make(chan struct{}), failSends: make(chan struct{})}
	defer close(ss.end)
	close(ss.failSends)
	req := func(names ...string) []byte {
		b, err := proto.Marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.RouteURL, ResourceNamesSubscribe: names})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ss, true, "") }()
	ss.reqs <- req("a") // answered; the send fails and the stream ends
	select {
	case <-served:
	case <-time.After(testutil.Wait):
		t.Fatal("the stream did not end when its send failed")
	}
	ss.reqs <- req("b") // read by the receiving side after the stream ended
	// The receiving side ends once it has seen the stream is over (Find
	// waits for that, with a deadline); it must not have subscribed.
	leak := goleak.Find(before)
	mu.Lock()
	defer mu.Unlock()
	if len(interest) != 0 {
		t.Fatalf("subscriptions outlive the stream: %v", interest)
	}
	if leak != nil {
		t.Fatalf("the receiving side goes on after the stream ended: %v", leak)
	}
}
