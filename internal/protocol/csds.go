package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// csds serves envoy.service.status.v3.ClientStatusDiscoveryService: for
// every connected client (optionally filtered by node id), each resource
// it subscribed to or holds, with the variant it was sent and whether it
// ACKed or NACKed it — the management server's side of Envoy's config
// dump, as Istio's control plane offers it.
type csds struct{ s *Server }

func (c csds) FetchClientStatus(ctx context.Context, req *statusv3.ClientStatusRequest) (*statusv3.ClientStatusResponse, error) {
	return c.s.clientStatus(req, c.s.csdsScope(ctx))
}

// StreamClientStatus answers each request on the stream with the state
// at that moment.
func (c csds) StreamClientStatus(ss statusv3.ClientStatusDiscoveryService_StreamClientStatusServer) error {
	for {
		req, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := c.s.clientStatus(req, c.s.csdsScope(ss.Context()))
		if err != nil {
			return err
		}
		if err := ss.Send(resp); err != nil {
			return err
		}
	}
}

// clientStatus answers a CSDS request within what the caller may learn
// of (guard.go).
func (s *Server) clientStatus(req *statusv3.ClientStatusRequest, scope csdsScope) (*statusv3.ClientStatusResponse, error) {
	match, err := nodeMatcher(req.GetNodeMatchers())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := &statusv3.ClientStatusResponse{}
	// The streams are picked by node id and identity before any reports
	// its status: asking for one node costs one status, not the fleet's.
	for _, st := range s.sortedStreams() {
		if !match(st.nodeID()) || (scope.client != nil && !scope.client(st.identity)) {
			continue
		}
		cl := st.status()
		cc := &statusv3.ClientConfig{Node: cl.Node}
		for _, ts := range cl.Types {
			for _, g := range genericConfigs(ts) {
				if scope.resource == nil || scope.resource(g.TypeUrl, g.Name) {
					cc.GenericXdsConfigs = append(cc.GenericXdsConfigs, g)
				}
			}
		}
		out.Config = append(out.Config, cc)
	}
	return out, nil
}

// genericConfigs reports one type of a stream: each variant it holds and
// each name it asked for and was not sent.
func genericConfigs(ts TypeStatus) []*statusv3.ClientConfig_GenericXdsConfig {
	acked := ts.SentNonce != "" && ts.AckedNonce == ts.SentNonce
	nacked := ts.LastNack != nil && ts.LastNack.Nonce == ts.SentNonce
	var out []*statusv3.ClientConfig_GenericXdsConfig
	seen := map[string]bool{}
	for _, h := range ts.Held {
		seen[h.Name] = true
		g := &statusv3.ClientConfig_GenericXdsConfig{TypeUrl: ts.URL, Name: h.Name, VersionInfo: h.Version}
		if ts.SentAt != nil {
			g.LastUpdated = timestamppb.New(*ts.SentAt)
		}
		if h.Variant != nil {
			g.XdsConfig = csdsConfig(h.Variant)
		}
		switch {
		case h.Absent:
			g.ClientStatus, g.ConfigStatus = adminv3.ClientResourceStatus_DOES_NOT_EXIST, statusv3.ConfigStatus_SYNCED
		case nacked:
			g.ClientStatus, g.ConfigStatus = adminv3.ClientResourceStatus_NACKED, statusv3.ConfigStatus_ERROR
			g.ErrorState = &adminv3.UpdateFailureState{
				LastUpdateAttempt: timestamppb.New(ts.LastNack.At),
				Details:           ts.LastNack.Error,
				VersionInfo:       ts.LastNack.Version,
			}
		case acked:
			g.ClientStatus, g.ConfigStatus = adminv3.ClientResourceStatus_ACKED, statusv3.ConfigStatus_SYNCED
		default: // sent, not answered yet
			g.ClientStatus, g.ConfigStatus = adminv3.ClientResourceStatus_UNKNOWN, statusv3.ConfigStatus_STALE
		}
		out = append(out, g)
	}
	for _, sub := range ts.Subscriptions {
		if seen[sub.Name] || sub.Name == "*" {
			continue
		}
		seen[sub.Name] = true
		out = append(out, &statusv3.ClientConfig_GenericXdsConfig{TypeUrl: ts.URL, Name: sub.Name,
			ClientStatus: adminv3.ClientResourceStatus_REQUESTED, ConfigStatus: statusv3.ConfigStatus_NOT_SENT})
	}
	return out
}

// nodeMatcher turns CSDS node matchers into a predicate on node ids: a
// client is reported when any matcher matches (no matchers: every client).
// Matching on node metadata is not supported and is refused, rather than
// silently reporting clients the caller did not ask for.
func nodeMatcher(ms []*matcherv3.NodeMatcher) (func(string) bool, error) {
	if len(ms) == 0 {
		return func(string) bool { return true }, nil
	}
	var fs []func(string) bool
	for i, m := range ms {
		if len(m.GetNodeMetadatas()) > 0 {
			return nil, errors.New("node_matchers: node_metadatas is not supported; match on node_id")
		}
		f, err := stringMatcher(m.GetNodeId())
		if err != nil {
			return nil, fmt.Errorf("node_matchers[%d].node_id: %v", i, err)
		}
		fs = append(fs, f)
	}
	return func(id string) bool {
		for _, f := range fs {
			if f(id) {
				return true
			}
		}
		return false
	}, nil
}

func stringMatcher(m *matcherv3.StringMatcher) (func(string) bool, error) {
	if m == nil {
		return func(string) bool { return true }, nil
	}
	fold := func(s string) string { return s }
	if m.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		want := fold(p.Exact)
		return func(s string) bool { return fold(s) == want }, nil
	case *matcherv3.StringMatcher_Prefix:
		want := fold(p.Prefix)
		return func(s string) bool { return strings.HasPrefix(fold(s), want) }, nil
	case *matcherv3.StringMatcher_Suffix:
		want := fold(p.Suffix)
		return func(s string) bool { return strings.HasSuffix(fold(s), want) }, nil
	case *matcherv3.StringMatcher_Contains:
		want := fold(p.Contains)
		return func(s string) bool { return strings.Contains(fold(s), want) }, nil
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, err
		}
		return re.MatchString, nil
	}
	return nil, errors.New("an empty or unsupported string matcher")
}
