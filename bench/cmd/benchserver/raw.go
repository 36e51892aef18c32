package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/resource"
)

// raw is the practical limit of pushing a change: a hand-written ADS server
// (SotW and delta) that encodes each response once per change and sends the
// same bytes to every stream. It serves every cluster to every stream,
// whatever it subscribed to, and reads requests only to consume ACKs.
type raw struct {
	state atomic.Pointer[rawState]
	stop  chan struct{} // closed by close: ends the streams

	// Control-side state (the controller serializes setup and change).
	gen      uint64
	names    []string
	anys     []*anypb.Any // current clusters, encoded once each
	versions []string     // the generation each cluster last changed in
}

// rawState is one published generation; next is closed when a newer one
// replaces it, waking every stream at once.
type rawState struct {
	gen       uint64
	sotw      []byte // DiscoveryResponse holding every cluster
	deltaFull []byte // DeltaDiscoveryResponse holding every cluster
	deltaLast []byte // DeltaDiscoveryResponse of this generation's change only
	next      chan struct{}
}

// rawMsg is a response already in wire form.
type rawMsg struct{ b []byte }

// rawCodec sends rawMsg bytes as they are and defers to proto otherwise.
type rawCodec struct{ proto encoding.CodecV2 }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(m.b)}, nil
	}
	return c.proto.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

func (rawCodec) Name() string { return "proto" }

func newRaw() (impl, func(*grpc.Server), []grpc.ServerOption) {
	r := &raw{stop: make(chan struct{})}
	r.state.Store(&rawState{next: make(chan struct{})})
	desc := grpc.ServiceDesc{
		ServiceName: discoveryv3.AggregatedDiscoveryService_ServiceDesc.ServiceName,
		HandlerType: (*any)(nil),
		Metadata:    discoveryv3.AggregatedDiscoveryService_ServiceDesc.Metadata,
		Streams: []grpc.StreamDesc{
			{StreamName: "StreamAggregatedResources", ServerStreams: true, ClientStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error { return r.serve(ss, false) }},
			{StreamName: "DeltaAggregatedResources", ServerStreams: true, ClientStreams: true,
				Handler: func(_ any, ss grpc.ServerStream) error { return r.serve(ss, true) }},
		},
	}
	reg := func(g *grpc.Server) { g.RegisterService(&desc, r) }
	return r, reg, []grpc.ServerOption{grpc.ForceServerCodecV2(rawCodec{proto: encoding.GetCodecV2("proto")})}
}

func (r *raw) setup(_ context.Context, s control.Setup, cl [][]*clusterv3.Cluster) error {
	if err := gcpCheck(s); err != nil {
		return err
	}
	r.gen++
	ver := strconv.FormatUint(r.gen, 10)
	old := r.names
	r.names = make([]string, len(cl))
	r.anys = make([]*anypb.Any, len(cl))
	r.versions = make([]string, len(cl))
	keep := make(map[string]bool, len(cl))
	for i, vs := range cl {
		a, err := marshalAny(vs[0])
		if err != nil {
			return err
		}
		r.names[i], r.anys[i], r.versions[i] = vs[0].GetName(), a, ver
		keep[r.names[i]] = true
	}
	var removed []string
	for _, n := range old {
		if !keep[n] {
			removed = append(removed, n)
		}
	}
	all := make([]int, len(cl))
	for i := range all {
		all[i] = i
	}
	return r.publish(all, removed)
}

func (r *raw) change(_ context.Context, _ int, cl [][]*clusterv3.Cluster) error {
	r.gen++
	ver := strconv.FormatUint(r.gen, 10)
	changed := make([]int, len(cl))
	for i, vs := range cl {
		a, err := marshalAny(vs[0])
		if err != nil {
			return err
		}
		r.anys[i], r.versions[i] = a, ver
		changed[i] = i
	}
	return r.publish(changed, nil)
}

func marshalAny(c *clusterv3.Cluster) (*anypb.Any, error) {
	b, err := resource.Marshal(c)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: resource.ClusterURL, Value: b}, nil
}

// publish encodes generation r.gen once and wakes every stream. changed
// are the clusters of this generation's delta, removed the names it drops.
func (r *raw) publish(changed []int, removed []string) error {
	ver := strconv.FormatUint(r.gen, 10)
	enc := proto.MarshalOptions{Deterministic: true}
	sotw, err := enc.Marshal(&discoveryv3.DiscoveryResponse{
		VersionInfo: ver, Resources: r.anys, TypeUrl: resource.ClusterURL, Nonce: ver})
	if err != nil {
		return err
	}
	deltaOf := func(idx []int, removed []string) ([]byte, error) {
		res := make([]*discoveryv3.Resource, len(idx))
		for k, i := range idx {
			res[k] = &discoveryv3.Resource{Name: r.names[i], Version: r.versions[i], Resource: r.anys[i]}
		}
		return enc.Marshal(&discoveryv3.DeltaDiscoveryResponse{SystemVersionInfo: ver, Resources: res,
			TypeUrl: resource.ClusterURL, RemovedResources: removed, Nonce: ver})
	}
	all := make([]int, len(r.anys))
	for i := range all {
		all[i] = i
	}
	full, err := deltaOf(all, nil)
	if err != nil {
		return err
	}
	last, err := deltaOf(changed, removed)
	if err != nil {
		return err
	}
	ns := &rawState{gen: r.gen, sotw: sotw, deltaFull: full, deltaLast: last, next: make(chan struct{})}
	old := r.state.Swap(ns)
	close(old.next)
	return nil
}

// serve runs one stream: after the first request it sends the current
// state, then every new generation as it is published.
func (r *raw) serve(ss grpc.ServerStream, delta bool) error {
	ctx := ss.Context()
	recv := func() error {
		if delta {
			return ss.RecvMsg(new(discoveryv3.DeltaDiscoveryRequest))
		}
		return ss.RecvMsg(new(discoveryv3.DiscoveryRequest))
	}
	if err := recv(); err != nil {
		return eofOK(err)
	}
	errc := make(chan error, 1)
	go func() {
		for {
			if err := recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	var sent *rawState
	for {
		cur := r.state.Load()
		if cur.gen > 0 && (sent == nil || cur.gen != sent.gen) {
			b := cur.sotw
			if delta {
				b = cur.deltaFull
				if sent != nil && sent.gen+1 == cur.gen {
					b = cur.deltaLast
				}
			}
			if err := ss.SendMsg(&rawMsg{b}); err != nil {
				return err
			}
			sent = cur
			continue
		}
		select {
		case <-cur.next:
		case err := <-errc:
			return eofOK(err)
		case <-ctx.Done():
			return ctx.Err()
		case <-r.stop:
			return nil
		}
	}
}

func eofOK(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

func (r *raw) close() { close(r.stop) }
