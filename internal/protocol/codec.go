package protocol

import (
	"context"
	"strconv"
	"unsafe"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/encoding/protowire"
)

// Encoded is a response already in wire form: a body shared by every stream
// that gets the same response, and the nonce field of this stream's copy.
// Protobuf fields may come in any order, so body+nonce is a valid
// DiscoveryResponse or DeltaDiscoveryResponse, and nothing is marshaled or
// copied per stream (docs/architecture.md §5).
type Encoded struct {
	Body  []byte
	Nonce []byte
}

// newNonce encodes nonce number n as field, and returns the field's bytes
// and the nonce as a string, both in one allocation: the string is the
// field's tail, which is never written again (a response's nonce is sent,
// and then only compared with what the client sends back).
func newNonce(field protowire.Number, n uint64) ([]byte, string) {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], n, 10)
	b := protowire.AppendTag(make([]byte, 0, len(d)+2), field, protowire.BytesType)
	b = protowire.AppendBytes(b, d)
	s := b[len(b)-len(d):]
	return b, unsafe.String(unsafe.SliceData(s), len(s))
}

// codec passes Encoded messages through as they are and hands everything
// else to the standard protobuf codec.
type codec struct{ proto encoding.CodecV2 }

// ServerCodec returns the gRPC server option that lets protocol send
// Encoded responses. The roles install it on the gRPC servers they create.
func ServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2("proto")})
}

// ServerOptions returns the gRPC server options xdsd's roles serve with:
// ServerCodec; a stream context protocol can end (stop), so that an idle
// stream costs one goroutine, not two; and a write buffer shared by the
// connections and released while they are idle.
//
// Memory per idle stream (BENCHMARKS.md, scenario (e)) is mostly gRPC's:
// the handler goroutine's stack and the transport's stream. A stream
// handler returning ends the stream, so one goroutine per stream is the
// floor; protocol's own sender exists only while a response is being sent.
// gRPC returns each connection's 32 KiB write buffer to a pool after every
// flush (its shared write buffer, on by default since grpc-go 1.66), which
// matters most when each proxy has its own connection (one stream per
// connection, as Envoy and gRPC clients do).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{ServerCodec(), grpc.InTapHandle(tapStop)}
}

// stopper is a gRPC stream's context with its own cancel: tapStop makes it
// the stream's context, the one gRPC's reads and flow-control waits watch,
// so cancelling it ends them.
type stopper struct {
	context.Context
	stop context.CancelFunc
}

type stopKey struct{}

func (s *stopper) Value(k any) any {
	if k == (stopKey{}) {
		return s
	}
	return s.Context.Value(k)
}

// tapStop runs as gRPC reads a new stream's headers (grpc.InTapHandle): the
// context it returns becomes the stream's.
func tapStop(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	return &stopper{Context: ctx, stop: cancel}, nil
}

// streamStop returns what ends the stream of ctx, if ServerOptions made it.
func streamStop(ctx context.Context) context.CancelFunc {
	if s, ok := ctx.Value(stopKey{}).(*stopper); ok {
		return s.stop
	}
	return nil
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(e.Body), mem.SliceBuffer(e.Nonce)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawRequest); ok {
		r.fill(data)
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (c codec) Name() string { return "proto" }
