package protocol

import (
	"hash/maphash"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// rawRequest receives a request undecoded, into a buffer the stream
// reuses: most SotW requests are ACKs repeating the whole name list, and
// decoding those into fresh strings, only to find nothing changed, would be
// most of an idle fleet's cost.
type rawRequest struct{ b []byte }

func (r *rawRequest) fill(data mem.BufferSlice) {
	n := data.Len()
	if cap(r.b) < n {
		r.b = make([]byte, n)
	}
	r.b = r.b[:n]
	data.CopyTo(r.b)
}

// Field numbers of DiscoveryRequest.
const (
	reqVersion   = 1
	reqNode      = 2
	reqNames     = 3
	reqTypeURL   = 4
	reqNonce     = 5
	reqError     = 6
	reqLocators  = 7
	maxFastBytes = 1 << 20
)

// plainAck is what the fast path reads of a SotW request.
type plainAck struct {
	typeURL, version, nonce []byte
	digest                  [2]uint64
}

// readPlainAck reads a SotW request that carries neither a node, nor an
// error, nor resource locators — an ACK in the common case — with the
// digest of its names computed as requestDigest does. ok is false for any
// other request, which is then decoded in full.
func readPlainAck(b []byte) (a plainAck, ok bool) {
	if len(b) > maxFastBytes {
		return a, false
	}
	var hs [2]maphash.Hash
	for i := range hs {
		hs[i].SetSeed(digestSeeds[i])
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return a, false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return a, false
		}
		b = b[n:]
		switch num {
		case reqVersion:
			a.version = v
		case reqTypeURL:
			a.typeURL = v
		case reqNonce:
			a.nonce = v
		case reqNames:
			for i := range hs {
				hs[i].Write(v)
				hs[i].WriteByte(0)
			}
		default: // node, error_detail, locators, or anything unknown
			return a, false
		}
	}
	for i := range hs {
		hs[i].WriteByte(1) // requestDigest's end of names; no locators
		a.digest[i] = hs[i].Sum64()
	}
	return a, true
}

// handlePlainAck handles a plain ACK that changes nothing without decoding
// it: the type is known, the nonce is the latest (§1.1, §1.2) or stale
// (§1.8), and the names are the last request's. It reports false, having
// changed nothing, for anything else.
func (s *stream) handlePlainAck(a plainAck) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return false
	}
	ts := s.fastType(a.typeURL)
	if ts == nil || len(a.nonce) == 0 || ts.nonce == "" {
		return false // a nonce before any response is another stream's (§1.1)
	}
	if string(a.nonce) != ts.nonce {
		s.requests++
		ts.counters(s.srv.metrics).stale.Inc()
		return true
	}
	if !ts.hasLastReq || a.digest != ts.lastReq {
		return false
	}
	s.requests++
	// The claimed version is passed as the string it equals when it is
	// the one sent (an ACK's): converting the bytes would allocate.
	claimed := ts.sentVersion
	if string(a.version) != claimed {
		claimed = string(a.version)
	}
	s.ackOrNack(ts, ts.nonce, ts.sentVersion, claimed, "", false, time.Now())
	return true
}

// fastType is the state of the type a plain ACK names (s.mu held), nil if
// the stream has none: on a per-type service an empty type URL is the
// service's. The lookup converts typeURL without allocating.
func (s *stream) fastType(typeURL []byte) *typeState {
	if s.fixedType != "" && (len(typeURL) == 0 || string(typeURL) == s.fixedType) {
		return s.knownType(s.fixedType)
	}
	if ts := s.lastType; ts != nil && string(typeURL) == ts.typ.URL {
		return ts
	}
	ts := s.types[string(typeURL)] // converted in the index: no allocation
	if ts != nil {
		s.lastType = ts
	}
	return ts
}

// knownType is s.types[typeURL] (s.mu held), through the one last found:
// a stream's ACKs and changes are mostly of one type, and comparing with
// the last one's URL (shared by every stream) reads no memory of the
// stream's map, which a fan-out over thousands of streams finds out of
// the cache. A type's state, once made, stays the stream's.
func (s *stream) knownType(typeURL string) *typeState {
	if ts := s.lastType; ts != nil && ts.typ.URL == typeURL {
		return ts
	}
	ts := s.types[typeURL]
	if ts != nil {
		s.lastType = ts
	}
	return ts
}

// Field numbers of DeltaDiscoveryRequest that a plain delta ACK carries.
const (
	deltaReqTypeURL = 2
	deltaReqNonce   = 6
)

// readPlainDeltaAck reads a delta request that carries only a type URL and
// a response nonce — an ACK, in the common case — without decoding it. ok
// is false for any other request.
func readPlainDeltaAck(b []byte) (typeURL, nonce []byte, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, nil, false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		switch num {
		case deltaReqTypeURL:
			typeURL = v
		case deltaReqNonce:
			nonce = v
		default: // node, subscriptions, an error: decoded in full
			return nil, nil, false
		}
	}
	return typeURL, nonce, len(nonce) > 0
}

// handlePlainDeltaAck acknowledges a response (§2.1) without decoding the
// request; it reports false, having changed nothing, when the request
// needs the full path (an unknown type or stream state not set up yet).
func (s *stream) handlePlainDeltaAck(typeURL, nonce []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.node == nil {
		return false
	}
	ts := s.fastType(typeURL)
	if ts == nil {
		return false
	}
	s.requests++
	// Newest first: a client ACKs the response it just received, which is
	// the last sent unless more went out since (nonces are unique on a
	// stream, so the order finds the same one).
	for k := range len(ts.recent) {
		if r := ts.newest(k); r.nonce == string(nonce) {
			s.ackOrNack(ts, r.nonce, r.version, r.version, "", false, time.Now())
			return true
		}
	}
	ts.counters(s.srv.metrics).stale.Inc()
	return true
}
