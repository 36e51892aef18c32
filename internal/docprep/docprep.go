// Package docprep lets the reader of a batch of authored resources work on
// each document on the goroutine that decoded it, with what its
// validation already decoded: the client checks (internal/clientcheck)
// read every Any a document holds, and decoding them twice doubled their
// cost on a large apply.
//
// It is the one link between package resource and such readers, kept out
// of resource's public API (docs/architecture.md §3): resource.DecodeReader
// prepares the documents of a source that implements Reader, and a Go
// user cannot, since Anys cannot be named outside the module.
package docprep

import (
	"bytes"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// Reader is a source of authored documents that wants each valid
// document, D (*resource.Document), prepared as it is decoded: Prepare is
// called on the decoding goroutine, in parallel with the other documents
// and before the caller's function has the document, so it must be safe
// to call concurrently and must need none of the other documents.
//
// It is generic so that this package need not import resource, which
// imports it; resource and its readers both name Reader[*resource.Document],
// so the compiler checks that they agree.
type Reader[D any] interface {
	io.Reader
	Prepare(d D, anys *Anys)
}

// MaxAnys bounds the Any values one document keeps decoded (they are looked
// up one by one): past it, the rest are decoded again when asked for.
const MaxAnys = 16

// Anys are the contents of a document's Any values, decoded once (by its
// validation) and shared with what reads the document next, by the bytes
// they were decoded from. A nil *Anys keeps nothing.
type Anys struct {
	list []decoded
}

type decoded struct {
	url   string
	value []byte
	m     proto.Message
}

// Keep keeps m, decoded from an Any of type url with contents value,
// unless MaxAnys are kept already.
func (s *Anys) Keep(url string, value []byte, m proto.Message) {
	if len(s.list) < MaxAnys {
		s.list = append(s.list, decoded{url: url, value: value, m: m})
	}
}

// Unpack returns the contents of a, decoded: the message kept for the same
// type and bytes (shared: read it, do not change it), else decoded now.
func (s *Anys) Unpack(a *anypb.Any) (proto.Message, error) {
	if s != nil {
		for _, d := range s.list {
			if d.url == a.GetTypeUrl() && bytes.Equal(d.value, a.GetValue()) {
				return d.m, nil
			}
		}
	}
	return anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
}
