package protocol

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
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

func nonceField(field protowire.Number, nonce string) []byte {
	b := protowire.AppendTag(make([]byte, 0, len(nonce)+2), field, protowire.BytesType)
	return protowire.AppendString(b, nonce)
}

// codec passes Encoded messages through as they are and hands everything
// else to the standard protobuf codec.
type codec struct{ proto encoding.CodecV2 }

// ServerCodec returns the gRPC server option that lets protocol send
// Encoded responses. The roles install it on the gRPC servers they create.
func ServerCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2("proto")})
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
