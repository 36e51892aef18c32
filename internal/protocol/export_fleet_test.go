package protocol

import (
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/fleet"
)

// AddIdleStream adds to s a stream with no connection behind it, as an
// idle client that subscribed to names of typeURL by name (or to every
// resource of it, with no names) and ACKed version 1: the fleet index's
// benchmarks hold 100,000 of them where gRPC streams would cost a
// process of their own.
func AddIdleStream(s *Server, node string, params constraint.Params, typeURL string, names ...string) {
	st := &stream{srv: s, id: s.ids.Add(1), addr: "127.0.0.1:1", started: time.Now(), types: map[string]*typeState{}}
	initLimiter(&st.limiter, 1, 1)
	st.sub = db.NewSubscriber(func() {})
	st.sub.Owner = st
	s.mu.Lock()
	s.streams[st.id] = st
	s.mu.Unlock()
	st.mu.Lock()
	st.node, st.nodeParams = &corev3.Node{Id: node, UserAgentName: "envoy"}, params
	st.member = s.fleet.Join(st, fleet.Envoy, node, params)
	ts := st.typeState(typeURL)
	if len(names) == 0 {
		names = []string{db.Wildcard}
	}
	m := map[db.Key]*db.Sub{}
	for _, n := range names {
		w := st.newWatch(ts, n, nil, false)
		m[w.Key] = w
		s.fleet.Subscribed(st.member, w.ParamsKey, w.Params, 1)
	}
	ts.ws = s.sets.intern(typeURL, m)
	ts.sentVersion, ts.ackVersion, ts.nonce, ts.ackNonce = "1", "1", "1", "1"
	st.mu.Unlock()
	for _, w := range m {
		s.db.Subscribe(st.sub, *w)
	}
}
