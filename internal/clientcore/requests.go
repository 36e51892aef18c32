package clientcore

import (
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/resource"
)

// sentRequests tracks which subscriptions a stream's SotW requests of one
// type named, so that a full-state response deletes only what the request
// it answers named (docs/protocol.md §1.7). The server answers the latest
// request it has (§1.8), but a response may cross newer requests on the
// wire: it answers one of the requests from floor to n, the ones sent
// before it arrived. A response holding a name answers a request naming
// it, which raises floor.
type sentRequests struct {
	n     int            // requests sent
	floor int            // the earliest request the latest response may answer
	since map[db.Key]int // what the latest request names → the request it has been named since
	left  []span         // what requests from floor on named, and the latest does not
}

// span: requests from..to-1 named k.
type span struct {
	k        db.Key
	from, to int
}

// record notes a request naming keys.
func (r *sentRequests) record(keys map[db.Key]bool) {
	r.n++
	if r.since == nil {
		r.since = map[db.Key]int{}
	}
	for k, from := range r.since {
		if !keys[k] {
			r.left = append(r.left, span{k, from, r.n})
			delete(r.since, k)
		}
	}
	for k := range keys {
		if _, ok := r.since[k]; !ok {
			r.since[k] = r.n
		}
	}
}

// answered narrows the requests a response may answer by the resources
// it holds: each was named by the request answered (or the wildcard was),
// so that request is no earlier than the first one from floor naming it.
func (r *sentRequests) answered(puts []*resource.Variant) {
	r.floor = max(r.floor, 1)
	earliest := map[string]int{}
	note := func(name string, from int) {
		from = max(from, r.floor)
		if e, ok := earliest[name]; !ok || from < e {
			earliest[name] = from
		}
	}
	for k, from := range r.since {
		note(k.Name, from)
	}
	for _, s := range r.left {
		if s.to > r.floor {
			note(s.k.Name, s.from)
		}
	}
	wild, wildOK := earliest[db.Wildcard]
	floor := r.floor
	for _, v := range puts {
		e, ok := earliest[v.Name]
		if wildOK && (!ok || wild < e) {
			e, ok = wild, true
		}
		if ok {
			// (A name no request from floor on named was sent unasked.)
			floor = max(floor, e)
		}
	}
	r.floor = floor
	// A name the response holds that requests from floor on left out and
	// named again (a refetch, an unsubscribe and subscribe) is taken as
	// named throughout: were the response an answer to a request from
	// before the gap, it crossed the requests of the gap, which a server
	// then ignores for their stale nonce (§1.8), so no answer to them
	// comes. Otherwise nothing would prove again that the name is named.
	present := make(map[string]bool, len(puts))
	for _, v := range puts {
		present[v.Name] = true
	}
	keep := r.left[:0]
	for _, s := range r.left {
		if from, ok := r.since[s.k]; ok && present[s.k.Name] {
			r.since[s.k] = min(from, s.from)
			continue
		}
		if s.to > r.floor {
			keep = append(keep, s)
		}
	}
	r.left = keep
}

// named reports whether every request the latest response may answer
// named k.
func (r *sentRequests) named(k db.Key) bool {
	from, ok := r.since[k]
	return ok && r.floor > 0 && from <= r.floor
}

// pendingAck is the acknowledgement a response is due: an ACK, or a NACK
// (err set) with the rejections it reports.
type pendingAck struct {
	version, nonce string
	err            string
	rejected       []rejection
}

// rejection is one reason a response was NACKed: a rejected resource's
// name ("" when it could not be told) and the reason.
type rejection struct{ name, msg string }

// nack makes a NACK of rejections, with the version last accepted (§1.3).
func nack(version, nonce string, rs []rejection) *pendingAck {
	msgs := make([]string, len(rs))
	for i, r := range rs {
		msgs[i] = r.msg
	}
	return &pendingAck{version: version, nonce: nonce, err: strings.Join(msgs, "; "), rejected: rs}
}

// newStream resets a type's per-stream state for a new stream. What was
// due on the old one is moot — unsubscriptions, SotW fetches again, ACKs
// and NACKs: the first request on the new one names every subscription
// anew (§1.6; delta declares what it holds, §2.9).
func (t *upType) newStream(sameServer bool) {
	t.requested = false
	// Except a subscription not sent yet — a delta fetch-again (refetch)
	// among them: the first request names it with the rest, and, being
	// due, it is not declared held (deltaRequest), so the server sends it.
	var due map[db.Key]*db.Sub
	for k, s := range t.toSub {
		if t.subs[k] == s {
			if due == nil {
				due = map[db.Key]*db.Sub{}
			}
			due[k] = s
		}
	}
	t.toSub, t.toUnsub = due, nil
	t.bounce, t.forceSend = nil, false
	t.ack, t.nacks = nil, nil
	t.sent = sentRequests{}
	t.fresh = nil
	// A nonce belongs to one stream (§1.1); a version to one server (§1.4:
	// the first request after a reconnect carries the last version seen —
	// from that server).
	t.nonce = ""
	if !sameServer {
		t.version = ""
	}
	t.declare = sameServer
}

// bounceSub makes a SotW stream fetch a subscription again: the next
// request leaves it out and the one after puts it back. Nothing is needed
// before the type's first request on the stream, which names everything.
func (ch *channel) bounceSub(t *upType, k db.Key) {
	if ch.connected < 0 || ch.servers[ch.connected].Delta() || !t.requested {
		return
	}
	if t.bounce == nil {
		t.bounce = map[db.Key]bool{}
	}
	t.bounce[k] = true
}

// refetch asks the server to send a subscribed resource again (a relay
// may not answer a new downstream from a do_not_cache copy). Delta: the
// subscription is sent again, which a server must answer (docs/protocol.md
// §2.2). SotW: the name is left out of one request and put back.
func (ch *channel) refetch(k db.Key) {
	t, s := ch.lookup(k)
	if s == nil {
		return
	}
	if ch.connected >= 0 && !ch.servers[ch.connected].Delta() {
		ch.bounceSub(t, k)
	} else {
		if t.toSub == nil {
			t.toSub = map[db.Key]*db.Sub{}
		}
		t.toSub[k] = s
	}
	ch.signal()
}

// needFresh counts a need (add 1) or its end (add -1) for the server's
// fresh word on a name: while needed, a reconnecting stream does not
// declare the version held, so the server sends it again.
func (ch *channel) needFresh(typeURL, n string, add int) {
	t := ch.typ(typeURL)
	if t.refresh == nil {
		t.refresh = map[string]int{}
	}
	first := add > 0 && t.refresh[n] == 0
	if t.refresh[n] += add; t.refresh[n] <= 0 {
		delete(t.refresh, n)
	}
	if !first || ch.connected < 0 || !t.requested {
		return
	}
	// A stream is open (not proven yet, or the watcher would not need this)
	// and has asked for the name already: it may have declared the version
	// held, or been answered before this need. Fetch the name again, so
	// that its server's word comes on this stream.
	for k, s := range t.subs {
		if k.Name != n {
			continue
		}
		if ch.servers[ch.connected].Delta() {
			if t.toSub == nil {
				t.toSub = map[db.Key]*db.Sub{}
			}
			t.toSub[k] = s
		} else {
			ch.bounceSub(t, k)
		}
	}
	ch.signal()
}

// node returns the node to send on a stream's first request, with the
// client features this client has: it unwraps SotW resources, and it
// honours TTLs and heartbeats on both transports (docs/protocol.md §2.7).
func (ch *channel) node() *corev3.Node {
	n := &corev3.Node{}
	if ch.c.b.Node != nil {
		n = proto.Clone(ch.c.b.Node).(*corev3.Node)
	}
	if n.UserAgentName == "" {
		// Servers tell their clients' software by it (xdsd's fleet view:
		// a relay is agent "xdsd", not the gRPC library under it).
		n.UserAgentName = "xdsd"
	}
	// TTLs too, over SotW as well: they come in the wrapped resources.
	n.ClientFeatures = append(n.ClientFeatures, "xds.config.resource-in-sotw", "xds.config.supports-resource-in-sotw",
		"xds.config.supports-resource-ttl")
	return n
}

// requests builds what is due on the stream: the first request of each
// type (all its subscriptions; delta with initial_resource_versions),
// subscription changes, and ACKs/NACKs.
func (ch *channel) requests(srv clientdata.ServerConfig) []proto.Message {
	var out []proto.Message
	urls := make([]string, 0, len(ch.types))
	for u := range ch.types {
		urls = append(urls, u)
	}
	sort.Slice(urls, func(i, j int) bool {
		a, b := resource.ForURL(urls[i]), resource.ForURL(urls[j])
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return urls[i] < urls[j]
	})
	first := true
	for _, u := range urls {
		t := ch.types[u]
		// (A nil *Request in a proto.Message would not be nil.)
		var req proto.Message
		if srv.Delta() {
			out = append(out, ch.deltaNACKs(t)...)
			if r := ch.deltaRequest(t); r != nil {
				req = r
			}
		} else {
			if len(t.bounce) > 0 && t.requested {
				out = append(out, ch.sotwBounce(t))
			}
			if r := ch.sotwRequest(t); r != nil {
				req = r
			}
		}
		if req == nil {
			continue
		}
		if first && !ch.anyRequested() {
			switch r := req.(type) {
			case *discoveryv3.DiscoveryRequest:
				r.Node = ch.node()
			case *discoveryv3.DeltaDiscoveryRequest:
				r.Node = ch.node()
			}
		}
		first = false
		out = append(out, req)
		t.requested = true
	}
	return out
}

func (ch *channel) anyRequested() bool {
	for _, t := range ch.types {
		if t.requested {
			return true
		}
	}
	return false
}

func sortedSubs(m map[db.Key]*db.Sub) []*db.Sub {
	out := make([]*db.Sub, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ParamsKey < out[j].ParamsKey
	})
	return out
}

// sotwBounce is the request without the subscriptions to fetch again; the
// next request puts them back, and the server sends them (§1.6). Being the
// first request since the last response, it carries the ACK or NACK due:
// a server would take a request with that nonce and no error_detail for
// an ACK (§1.3).
func (ch *channel) sotwBounce(t *upType) *discoveryv3.DiscoveryRequest {
	req := &discoveryv3.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce}
	setAck(req, t.ack)
	t.ack = nil
	named := map[db.Key]bool{}
	for _, s := range sortedSubs(t.subs) {
		k := s.Key
		if t.bounce[k] {
			continue
		}
		named[k] = true
		addToRequest(req, s)
	}
	// Until the server answers the next request, a full-state response may
	// leave them out without deleting them (sentRequests).
	if resource.ForURL(t.url).FullState {
		t.sent.record(named)
	}
	t.bounce = nil
	t.forceSend = true // the request that puts them back
	return req
}

// addToRequest names a subscription in a SotW request: by TP2 locator, or
// plainly.
func addToRequest(req *discoveryv3.DiscoveryRequest, s *db.Sub) {
	if s.Locator {
		req.ResourceLocators = append(req.ResourceLocators, &discoveryv3.ResourceLocator{Name: s.Name, DynamicParameters: s.Params})
	} else {
		req.ResourceNames = append(req.ResourceNames, s.Name)
	}
}

// sotwRequest: every request carries the whole name list (§1.6); an ACK or
// NACK carries the version and nonce it answers (§1.2, §1.3); a type with
// nothing left is sent an empty list once (the unsubscribe gRPC clients
// send, docs/testing.md).
func (ch *channel) sotwRequest(t *upType) *discoveryv3.DiscoveryRequest {
	changed := len(t.toSub)+len(t.toUnsub) > 0 || t.forceSend
	if t.requested && !changed && t.ack == nil {
		return nil
	}
	if !t.requested && len(t.subs) == 0 {
		return nil
	}
	req := &discoveryv3.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce}
	named := make(map[db.Key]bool, len(t.subs))
	for _, s := range sortedSubs(t.subs) {
		named[s.Key] = true
		addToRequest(req, s)
	}
	if resource.ForURL(t.url).FullState {
		t.sent.record(named)
	}
	setAck(req, t.ack)
	t.toSub, t.toUnsub, t.ack, t.forceSend = nil, nil, nil, false
	return req
}

// setAck makes a SotW request the ACK or NACK a response is due (§1.2,
// §1.3).
func setAck(req *discoveryv3.DiscoveryRequest, a *pendingAck) {
	if a == nil {
		return
	}
	req.VersionInfo, req.ResponseNonce = a.version, a.nonce
	if a.err != "" {
		req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: a.err}
	}
}

// deltaNACKs are the requests of the NACKs a later response overtook
// before they were sent: each carries its own nonce (§2.1).
func (ch *channel) deltaNACKs(t *upType) []proto.Message {
	if !t.requested {
		return nil
	}
	var out []proto.Message
	for _, a := range t.nacks {
		out = append(out, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: a.nonce,
			ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: a.err}})
	}
	t.nacks = nil
	return out
}

// deltaRequest: on a new stream every subscription with what the client
// holds in initial_resource_versions (§2.9); then the changes; ACK/NACK by
// nonce (§2.1).
func (ch *channel) deltaRequest(t *upType) *discoveryv3.DeltaDiscoveryRequest {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.url}
	add := func(s *db.Sub) {
		if s.Locator {
			req.ResourceLocatorsSubscribe = append(req.ResourceLocatorsSubscribe, &discoveryv3.ResourceLocator{Name: s.Name, DynamicParameters: s.Params})
		} else {
			req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, s.Name)
		}
	}
	if !t.requested {
		if len(t.subs) == 0 {
			return nil
		}
		for _, s := range sortedSubs(t.subs) {
			add(s)
		}
		// Not declared: what the server must send anew — names a watcher
		// needs its fresh word on, names to fetch again (refetch), what
		// is only retained.
		again := map[string]bool{}
		for k := range t.toSub {
			again[k.Name] = true
		}
		for n, vs := range t.held {
			if !t.declare {
				break
			}
			if t.refresh[n] > 0 || again[n] || t.retained[n] {
				continue
			}
			for _, v := range vs {
				if req.InitialResourceVersions == nil {
					req.InitialResourceVersions = map[string]string{}
				}
				req.InitialResourceVersions[n] = v
				break
			}
		}
	} else {
		for _, s := range sortedSubs(t.toSub) {
			add(s)
		}
		for _, s := range sortedSubs(t.toUnsub) {
			if s.Locator {
				req.ResourceLocatorsUnsubscribe = append(req.ResourceLocatorsUnsubscribe, &discoveryv3.ResourceLocator{Name: s.Name, DynamicParameters: s.Params})
			} else {
				req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, s.Name)
			}
		}
	}
	if t.ack != nil {
		req.ResponseNonce = t.ack.nonce
		if t.ack.err != "" {
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: t.ack.err}
		}
	}
	if t.requested && t.ack == nil && len(t.toSub)+len(t.toUnsub) == 0 {
		return nil
	}
	t.toSub, t.toUnsub, t.ack = nil, nil, nil
	return req
}
