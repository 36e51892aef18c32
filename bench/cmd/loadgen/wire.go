package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/bench/control"
)

// clusterURL is the only type the load generator subscribes to.
const clusterURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// wrapperURL is the Any type of a SotW resource wrapped in a discovery
// Resource (TP2 locators, resource-in-sotw).
const wrapperURL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

var errMalformed = errors.New("malformed response")

// Field numbers.
const (
	// DiscoveryResponse
	sotwRespVersion   = 1
	sotwRespResources = 2
	sotwRespNonce     = 5
	// DeltaDiscoveryResponse
	deltaRespResources    = 2
	deltaRespNonce        = 5
	deltaRespRemoved      = 6
	deltaRespRemovedNames = 8
	// DiscoveryRequest
	sotwReqVersion = 1
	sotwReqNode    = 2
	sotwReqNonce   = 5
	// DeltaDiscoveryRequest
	deltaReqNode  = 1
	deltaReqNonce = 6
	// Resource
	resName         = 3
	resResourceName = 8
)

// rawMsg receives one response as it came off the wire. The buffer belongs
// to gRPC's pool: Free it once done.
type rawMsg struct{ buf mem.Buffer }

// rawReq is a request made of a marshaled part shared by many streams
// (never modified) and a part owned by this one message.
type rawReq struct{ static, dyn []byte }

// codec hands responses over undecoded and sends rawReq as is; anything else
// is a proto message.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *rawReq:
		// gRPC keeps these after SendMsg returns, until they are written:
		// static is immutable, dyn is fresh for every message.
		return mem.BufferSlice{mem.SliceBuffer(m.static), mem.SliceBuffer(m.dyn)}, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		return mem.BufferSlice{mem.SliceBuffer(b)}, err
	}
	return nil, errors.New("loadgen codec: cannot marshal a value of this type")
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*rawMsg)
	if !ok {
		return errors.New("loadgen codec: can only unmarshal into *rawMsg")
	}
	// One buffer is just referenced; several (a message spanning frames)
	// are copied into one pooled buffer.
	m.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
	return nil
}

// tracker counts the distinct subscribed resources a stream holds, until it
// holds all it waits for.
type tracker struct {
	index map[string]int32 // subscribed names → bit, shared by every stream; nil: use set
	bits  []uint64
	set   map[string]struct{}
	count int
	want  int
}

func (t *tracker) reset() {
	clear(t.bits)
	clear(t.set)
	t.count = 0
}

func (t *tracker) add(name []byte) {
	if t.index != nil {
		i, ok := t.index[string(name)]
		if !ok {
			return
		}
		w, m := i>>6, uint64(1)<<(i&63)
		if t.bits[w]&m == 0 {
			t.bits[w] |= m
			t.count++
		}
		return
	}
	if _, ok := t.set[string(name)]; !ok {
		t.set[string(name)] = struct{}{}
		t.count++
	}
}

func (t *tracker) remove(name []byte) {
	if t.index != nil {
		i, ok := t.index[string(name)]
		if !ok {
			return
		}
		w, m := i>>6, uint64(1)<<(i&63)
		if t.bits[w]&m != 0 {
			t.bits[w] &^= m
			t.count--
		}
		return
	}
	if _, ok := t.set[string(name)]; ok {
		delete(t.set, string(name))
		t.count--
	}
}

func (t *tracker) done() bool { return t.count >= t.want }

// parseSotW reads a DiscoveryResponse's version_info and nonce and, when t
// is not nil, adds the name of every resource to t.
func parseSotW(b []byte, t *tracker) (version, nonce []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == sotwRespVersion || num == sotwRespNonce || num == sotwRespResources) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, nil, errMalformed
			}
			b = b[n:]
			switch num {
			case sotwRespVersion:
				version = v
			case sotwRespNonce:
				nonce = v
			default:
				if t != nil {
					name, err := anyName(v)
					if err != nil {
						return nil, nil, err
					}
					t.add(name)
				}
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
	}
	return version, nonce, nil
}

// parseDelta reads a DeltaDiscoveryResponse's nonce and, when t is not nil,
// adds every resource's name to t and drops the removed ones.
func parseDelta(b []byte, t *tracker) (nonce []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, errMalformed
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
		switch {
		case num == deltaRespNonce:
			nonce = v
		case t == nil:
		case num == deltaRespResources:
			name, err := resourceName(v)
			if err != nil {
				return nil, err
			}
			t.add(name)
		case num == deltaRespRemoved:
			t.remove(v)
		case num == deltaRespRemovedNames:
			name, err := bytesField(v, 1)
			if err != nil {
				return nil, err
			}
			t.remove(name)
		}
	}
	return nonce, nil
}

// anyName returns the name of the resource in a google.protobuf.Any: a
// Cluster's name, or a wrapping discovery Resource's.
func anyName(a []byte) ([]byte, error) {
	var url, val []byte
	for len(a) > 0 {
		num, typ, n := protowire.ConsumeTag(a)
		if n < 0 {
			return nil, errMalformed
		}
		a = a[n:]
		if typ == protowire.BytesType && (num == 1 || num == 2) {
			v, n := protowire.ConsumeBytes(a)
			if n < 0 {
				return nil, errMalformed
			}
			a = a[n:]
			if num == 1 {
				url = v
			} else {
				val = v
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, a); n < 0 {
			return nil, errMalformed
		}
		a = a[n:]
	}
	if string(url) == wrapperURL {
		return resourceName(val)
	}
	return bytesField(val, 1) // Cluster.name
}

// resourceName returns a discovery Resource's name, or its resource_name's.
func resourceName(r []byte) ([]byte, error) {
	var name []byte
	for len(r) > 0 {
		num, typ, n := protowire.ConsumeTag(r)
		if n < 0 {
			return nil, errMalformed
		}
		r = r[n:]
		if typ == protowire.BytesType && (num == resName || num == resResourceName) {
			v, n := protowire.ConsumeBytes(r)
			if n < 0 {
				return nil, errMalformed
			}
			r = r[n:]
			if num == resName {
				name = v
			} else {
				rn, err := bytesField(v, 1)
				if err != nil {
					return nil, err
				}
				name = rn
			}
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, r); n < 0 {
			return nil, errMalformed
		}
		r = r[n:]
	}
	return name, nil
}

// bytesField returns the last value of a length-delimited field.
func bytesField(b []byte, field protowire.Number) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
		if num == field && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, errMalformed
			}
			out = v
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, errMalformed
		}
		b = b[n:]
	}
	return out, nil
}

// nodeField encodes the node field of a first request: {id: id}.
func nodeField(field protowire.Number, id string) []byte {
	b := make([]byte, 0, len(id)+8)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(id))))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	return protowire.AppendString(b, id)
}

// sotwAck encodes the per-message part of a SotW ACK.
func sotwAck(version, nonce []byte) []byte {
	b := make([]byte, 0, len(version)+len(nonce)+6)
	b = protowire.AppendTag(b, sotwReqVersion, protowire.BytesType)
	b = protowire.AppendBytes(b, version)
	b = protowire.AppendTag(b, sotwReqNonce, protowire.BytesType)
	return protowire.AppendBytes(b, nonce)
}

// deltaAck encodes the per-message part of a delta ACK.
func deltaAck(nonce []byte) []byte {
	b := make([]byte, 0, len(nonce)+3)
	b = protowire.AppendTag(b, deltaReqNonce, protowire.BytesType)
	return protowire.AppendBytes(b, nonce)
}

// markerPrefix and markerSuffix surround the round number in
// control.MarkerFormat.
var markerPrefix, markerSuffix, markerOK = func() (string, string, bool) {
	p, s, ok := strings.Cut(control.MarkerFormat, "%d")
	return p, s, ok && p != "" && !strings.Contains(s, "%")
}()

var markerPrefixB, markerSuffixB = []byte(markerPrefix), []byte(markerSuffix)

// markerRound returns the round of a marker made with control.MarkerFormat.
func markerRound(m string) (int, bool) {
	if !markerOK {
		return 0, false
	}
	rest, ok := strings.CutPrefix(m, markerPrefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, markerSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

// maxMarkerRound returns the highest round of the control.MarkerFormat
// markers in b, 0 if none.
func maxMarkerRound(b []byte) int {
	if !markerOK {
		return 0
	}
	best := 0
	for {
		i := bytes.Index(b, markerPrefixB)
		if i < 0 {
			return best
		}
		b = b[i+len(markerPrefix):]
		n, j := 0, 0
		for j < len(b) && j < 9 && b[j] >= '0' && b[j] <= '9' {
			n = n*10 + int(b[j]-'0')
			j++
		}
		if j > 0 && bytes.HasPrefix(b[j:], markerSuffixB) && n > best {
			best = n
		}
	}
}
