package protocol

import (
	"runtime"
	"slices"
	"sync"
	"weak"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/xdsd/xdsd/resource"
)

// fragments are a variant's pieces of a discovery response, around its
// payload (resource.Variant.Any, encoded once when the variant was made):
// the envoy.service.discovery.v3.Resource header in each form, the Any
// header that wraps a Resource for SotW clients taking wrapped resources
// (docs/protocol.md §1.10), and the payload-less heartbeat Resource
// (docs/protocol.md §2.7), bare or (SotW) in an Any. The wire format is this package's business, so
// they are kept here, beside the resource model rather than in it.
type fragments struct {
	// hdr is the Resource up to and including the tag and length of its
	// `resource` field, by form: bit 0 names the variant by resource_name
	// with its constraints (TP2), bit 1 carries its TTL.
	hdr [4][]byte
	// wrapHdr is the google.protobuf.Any header holding hdr[form] +
	// payload, by form: what a SotW client taking wrapped resources gets.
	wrapHdr [4][]byte
	// heartbeat is a Resource with name, version and TTL and no payload;
	// nil for a variant without a TTL.
	heartbeat [2][]byte
	// wrappedBeat is heartbeat inside a google.protobuf.Any: a SotW
	// heartbeat.
	sotwBeat [2][]byte
}

// header returns the Resource header of the form asked: with tp2 the name
// goes in resource_name with the constraints (TP2 requires servers and
// proxies to send them; an unconstrained variant is named by `name`
// anyway), with ttl the variant's TTL goes along. Append Any() to get the
// whole Resource.
func (f *fragments) header(tp2, ttl bool) []byte { return f.hdr[form(tp2, ttl)] }

// wrapped returns the header of the Any wrapping header(tp2, ttl) + Any().
func (f *fragments) wrapped(tp2, ttl bool) []byte { return f.wrapHdr[form(tp2, ttl)] }

// beat returns the heartbeat Resource (nil without a TTL).
func (f *fragments) beat(tp2 bool) []byte { return f.heartbeat[form(tp2, false)] }

// wrappedBeat returns the heartbeat Resource inside an Any (nil without a
// TTL).
func (f *fragments) wrappedBeat(tp2 bool) []byte { return f.sotwBeat[form(tp2, false)] }

func form(tp2, ttl bool) int {
	f := 0
	if tp2 {
		f |= 1
	}
	if ttl {
		f |= 2
	}
	return f
}

func encodeFragments(v *resource.Variant) *fragments {
	f := &fragments{}
	payload := len(v.Any())
	for i := range 4 {
		tp2, ttl := i&1 != 0, i&2 != 0
		var b []byte
		if tp2 && !v.Constraints.IsZero() {
			rn := protowire.AppendTag(nil, 1, protowire.BytesType)
			rn = protowire.AppendString(rn, v.Name)
			if c, err := resource.Marshal(v.Constraints.Proto()); err == nil && len(c) > 0 {
				rn = protowire.AppendTag(rn, 2, protowire.BytesType)
				rn = protowire.AppendBytes(rn, c)
			}
			b = protowire.AppendTag(b, resourceLocatorName, protowire.BytesType)
			b = protowire.AppendBytes(b, rn)
		} else {
			b = protowire.AppendTag(b, resourceName, protowire.BytesType)
			b = protowire.AppendString(b, v.Name)
		}
		if v.Version != "" {
			b = protowire.AppendTag(b, resourceVersion, protowire.BytesType)
			b = protowire.AppendString(b, v.Version)
		}
		if ttl && v.TTL > 0 {
			d, _ := resource.Marshal(durationpb.New(v.TTL))
			b = protowire.AppendTag(b, resourceTTL, protowire.BytesType)
			b = protowire.AppendBytes(b, d)
			f.heartbeat[i&1] = slices.Clip(b)
			w := protowire.AppendTag(nil, 1, protowire.BytesType)
			w = protowire.AppendString(w, resource.WrapperURL)
			w = protowire.AppendTag(w, 2, protowire.BytesType)
			f.sotwBeat[i&1] = protowire.AppendBytes(w, b)
		}
		if v.DoNotCache {
			// cache_control { do_not_cache: true }
			b = protowire.AppendTag(b, resourceCacheControl, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte{0x08, 0x01})
		}
		b = protowire.AppendTag(b, resourcePayload, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(payload))
		f.hdr[i] = b
		w := protowire.AppendTag(nil, 1, protowire.BytesType)
		w = protowire.AppendString(w, resource.WrapperURL)
		w = protowire.AppendTag(w, 2, protowire.BytesType)
		w = protowire.AppendVarint(w, uint64(len(b)+payload))
		f.wrapHdr[i] = w
	}
	return f
}

// fragTable is a Server's side table of fragments, by variant: each
// variant's are encoded once, the first time a response carries it, and
// shared by every stream (docs/architecture.md §5: marshal once). A variant
// is held weakly: once the db, and every stream, have let go of it, its
// entry goes too. The zero value is ready; a nil table encodes afresh
// every time.
type fragTable struct {
	m sync.Map // weak.Pointer[resource.Variant] → *fragments
}

func (t *fragTable) of(v *resource.Variant) *fragments {
	if t == nil {
		return encodeFragments(v)
	}
	k := weak.Make(v)
	if f, ok := t.m.Load(k); ok {
		return f.(*fragments)
	}
	f, loaded := t.m.LoadOrStore(k, encodeFragments(v))
	if !loaded {
		runtime.AddCleanup(v, func(k weak.Pointer[resource.Variant]) { t.m.Delete(k) }, k)
	}
	return f.(*fragments)
}
