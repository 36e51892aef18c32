package clientcore

import (
	"context"
	"fmt"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client/clientdata"
)

// transport carries a channel's ADS streams to its servers (grpc-go's xDS
// client calls this a Transport): it is all a session needs of the
// network, so the ADS logic above it does not deal with connections.
type transport interface {
	// open starts an ADS stream, delta or SotW, to server i.
	open(ctx context.Context, i int, delta bool) (adsStream, error)
	// ready waits until server i is reachable, and reports false when
	// ctx ends first.
	ready(ctx context.Context, i int) bool
	close()
}

// adsStream is one ADS stream: requests out, responses in.
type adsStream interface {
	send(req proto.Message) error
	recv() (proto.Message, error)
}

// grpcTransport is a gRPC connection to each server, which gRPC keeps up
// (reconnecting with the client's backoff).
type grpcTransport struct {
	conns      []*grpc.ClientConn
	base, most time.Duration // the client's backoff, for ready
}

func dial(servers []clientdata.ServerConfig, o clientdata.Options) (*grpcTransport, error) {
	t := &grpcTransport{base: o.BackoffBase, most: o.BackoffMax}
	for _, s := range servers {
		creds, err := s.TransportCredentials()
		if err != nil {
			t.close()
			return nil, err
		}
		// Reconnect as this client's options say, not gRPC's default (1s
		// growing to 2 minutes), so a returning server is found in time.
		opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 20 * time.Second, Backoff: backoff.Config{
				BaseDelay: o.BackoffBase, Multiplier: 1.6, Jitter: 0.2, MaxDelay: o.BackoffMax}}),
		}, o.DialOptions...)
		conn, err := grpc.NewClient(s.URI, opts...)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("server %s: %w", s.URI, err)
		}
		t.conns = append(t.conns, conn)
	}
	return t, nil
}

func (t *grpcTransport) open(ctx context.Context, i int, delta bool) (adsStream, error) {
	c := discoveryv3.NewAggregatedDiscoveryServiceClient(t.conns[i])
	if delta {
		s, err := c.DeltaAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		return deltaStream{s}, nil
	}
	s, err := c.StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	return sotwStream{s}, nil
}

// ready kicks the connection at least every backoff interval: after a
// failure a gRPC connection may go idle and wait to be asked.
func (t *grpcTransport) ready(ctx context.Context, i int) bool {
	conn := t.conns[i]
	interval := t.base
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return true
		}
		conn.Connect()
		wctx, cancel := context.WithTimeout(ctx, interval)
		conn.WaitForStateChange(wctx, s)
		cancel()
		if ctx.Err() != nil {
			return false
		}
		interval = min(interval*2, t.most)
	}
}

func (t *grpcTransport) close() {
	for _, c := range t.conns {
		c.Close()
	}
}

type sotwStream struct {
	s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
}

func (s sotwStream) send(m proto.Message) error { return s.s.Send(m.(*discoveryv3.DiscoveryRequest)) }
func (s sotwStream) recv() (proto.Message, error) {
	return s.s.Recv()
}

type deltaStream struct {
	s discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func (s deltaStream) send(m proto.Message) error {
	return s.s.Send(m.(*discoveryv3.DeltaDiscoveryRequest))
}
func (s deltaStream) recv() (proto.Message, error) { return s.s.Recv() }
