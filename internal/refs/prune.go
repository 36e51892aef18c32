package refs

import (
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// Prune returns the wire form b of a message of type md with only what Of
// reads of it: the fields that can lead to a reference, and all of the
// messages that make one (a cluster: its scalars and eds_cluster_config),
// an Any's value pruned by its type.
// Of gives the same references for the message decoded from either, and
// decoding the pruned one costs a fraction: a server indexing a million
// stored clusters and endpoints for the client checks decoded each whole
// (circuit breakers, outlier detection, metadata, addresses) to read a
// name or two. some is false when what is left cannot make a reference
// (only empty messages on the way to one): Of gives none, and the
// message need not be decoded at all, as most endpoints.
func Prune(md protoreflect.MessageDescriptor, b []byte) (pruned []byte, some bool, err error) {
	return prune(make([]byte, 0, len(b)/4), md, b)
}

// keep is what Prune keeps of a field.
type keep uint8

const (
	drop    keep = iota
	whole        // as it is
	recurse      // a message, pruned in turn
)

var clusterName = (&clusterv3.Cluster{}).ProtoReflect().Descriptor().FullName()

var keepCache sync.Map // protoreflect.FullName → map[protowire.Number]keep

// keeps says, by field number, what Prune keeps of a message of type md;
// nil keeps all of it.
func keeps(md protoreflect.MessageDescriptor) map[protowire.Number]keep {
	if k, ok := keepCache.Load(md.FullName()); ok {
		return k.(map[protowire.Number]keep)
	}
	var out map[protowire.Number]keep
	if !refTypes[md.FullName()] || md.FullName() == clusterName {
		out = map[protowire.Number]keep{}
		for _, fd := range leads(md) {
			if fd.IsMap() || fd.IsPacked() {
				out[fd.Number()] = whole
			} else {
				out[fd.Number()] = recurse
			}
		}
		if md.FullName() == clusterName {
			// What the walker reads of a cluster (type, name,
			// eds_cluster_config): its scalars are cheap to keep.
			fs := md.Fields()
			for i := 0; i < fs.Len(); i++ {
				fd := fs.Get(i)
				if fd.Message() == nil || fd.Name() == "eds_cluster_config" {
					out[fd.Number()] = whole
				}
			}
		}
	}
	keepCache.Store(md.FullName(), out)
	return out
}

func prune(dst []byte, md protoreflect.MessageDescriptor, b []byte) ([]byte, bool, error) {
	if md.FullName() == anyName {
		return pruneAny(dst, b)
	}
	k := keeps(md)
	if k == nil {
		// A message that makes references is kept whole, and counts as
		// something even when empty.
		return append(dst, b...), true, nil
	}
	some := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, false, protowire.ParseError(m)
		}
		field := b[:n+m]
		b = b[n+m:]
		switch k[num] {
		case whole:
			dst, some = append(dst, field...), true
		case recurse:
			if typ != protowire.BytesType {
				dst, some = append(dst, field...), true
				continue
			}
			v, _ := protowire.ConsumeBytes(field[n:])
			// Kept even when empty: the indices of a list's elements
			// are in the references' paths.
			sub, subSome, err := prune(nil, md.Fields().ByNumber(num).Message(), v)
			if err != nil {
				return nil, false, err
			}
			some = some || subSome
			dst = protowire.AppendTag(dst, num, typ)
			dst = protowire.AppendBytes(dst, sub)
		}
	}
	return dst, some, nil
}

var anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()

// pruneAny prunes the value of an Any by the type it names (a cluster's
// transport socket holds a whole TLS context, of which the walker reads
// the secrets' names). One of a type this binary does not know is kept
// as it is.
func pruneAny(dst, b []byte) ([]byte, bool, error) {
	var url, value []byte
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if m < 0 {
			return nil, false, protowire.ParseError(m)
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(rest[n:])
			switch num {
			case 1:
				url = v
			case 2:
				value = v
			}
		}
		rest = rest[n+m:]
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(string(url))
	if err != nil {
		return append(dst, b...), true, nil
	}
	sub, some, err := prune(nil, mt.Descriptor(), value)
	if err != nil {
		return append(dst, b...), true, nil // for the decode to judge
	}
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendBytes(dst, url)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendBytes(dst, sub)
	return dst, some, nil
}
