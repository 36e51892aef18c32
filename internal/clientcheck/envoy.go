package clientcheck

import (
	"fmt"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/protowalk"
	"github.com/xdsd/xdsd/internal/refs"
)

// envoyRules are the checks Envoy makes when it loads a resource that the
// schema cannot express.
var envoyRules = []rule{envoyHTTPFilterOrder, envoyNetworkFilterOrder, envoyFilterChainMatches, envoyNoFilterChains, envoyDomains}

// The HTTP filters that end a chain (Envoy's isTerminalFilterByProto):
// the router. Every other filter of envoy.extensions.filters.http is not
// terminal.
var terminalHTTP = map[string]bool{
	"envoy.extensions.filters.http.router.v3.Router":                true,
	"envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec": true,
}

// httpFilterType is the type of an HTTP filter's configuration, "" when
// it is not known here (TypedStruct, ECDS with several types).
func httpFilterType(f *hcmv3.HttpFilter) string {
	if cd := f.GetConfigDiscovery(); cd != nil {
		if len(cd.GetTypeUrls()) == 1 {
			return typeName(cd.GetTypeUrls()[0])
		}
		return ""
	}
	t := typeName(f.GetTypedConfig().GetTypeUrl())
	if strings.HasSuffix(t, ".TypedStruct") {
		return ""
	}
	return t
}

// envoyHTTPFilterOrder: the router must be the last HTTP filter, and the
// last must be a terminal filter. Envoy (FilterChainUtility::checkFinalFilter
// in source/common/filter/config_discovery_impl.h, tested in
// http_connection_manager/config_test.cc RouterInverted and
// NonTerminalFilter) rejects the listener: "Error: terminal filter named
// envoy.filters.http.router of type envoy.filters.http.router must be the
// last filter in a http filter chain." An empty list is allowed.
func envoyHTTPFilterOrder(typeURL string, m proto.Message, report reporter) {
	for _, h := range hcms(typeURL, m) {
		fs := h.m.GetHttpFilters()
		for i, f := range fs {
			t := httpFilterType(f)
			p := h.path + "." + idx("http_filters", i)
			if i < len(fs)-1 && terminalHTTP[t] {
				report("envoy/router-last", Error, p, "Envoy rejects the listener: HTTP filter %q (%s) ends the chain, so it must be the last filter (\"terminal filter named %s ... must be the last filter in a http filter chain\")", f.GetName(), t, f.GetName())
			}
			if i == len(fs)-1 && t != "" && !terminalHTTP[t] && strings.HasPrefix(t, "envoy.extensions.filters.http.") {
				report("envoy/router-last", Error, p, "Envoy rejects the listener: the last HTTP filter, %q (%s), does not end the chain; add the router (envoy.extensions.filters.http.router.v3.Router) after it (\"non-terminal filter named %s ... is the last filter in a http filter chain\")", f.GetName(), t, f.GetName())
			}
		}
	}
}

// The network filters that end a chain (their factories' isTerminalFilter).
var terminalNetwork = map[string]bool{
	"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager": true,
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":                            true,
	"envoy.extensions.filters.network.echo.v3.Echo":                                     true,
	"envoy.extensions.filters.network.direct_response.v3.Config":                        true,
	"envoy.extensions.filters.network.redis_proxy.v3.RedisProxy":                        true,
	"envoy.extensions.filters.network.thrift_proxy.v3.ThriftProxy":                      true,
	"envoy.extensions.filters.network.generic_proxy.v3.GenericProxy":                    true,
}

// envoyNetworkFilterOrder: the same rule for network filters: "terminal
// filter named ... must be the last filter in a network filter chain",
// and "non-terminal filter named ... is the last filter in a network
// filter chain" (FilterChainUtility::checkFinalFilter, listener_impl.cc).
func envoyNetworkFilterOrder(typeURL string, m proto.Message, report reporter) {
	l, ok := m.(*listenerv3.Listener)
	if !ok || l.GetApiListener() != nil {
		return
	}
	for _, c := range chains(l) {
		fs := c.fc.GetFilters()
		for i, f := range fs {
			t := typeName(f.GetTypedConfig().GetTypeUrl())
			if f.GetConfigDiscovery() != nil || f.GetTypedConfig() == nil || strings.HasSuffix(t, ".TypedStruct") {
				continue
			}
			p := idx(c.path+".filters", i)
			if i < len(fs)-1 && terminalNetwork[t] {
				report("envoy/network-filter-last", Error, p, "Envoy rejects the listener: network filter %q (%s) ends the chain, so it must be the last (\"terminal filter named %s ... must be the last filter in a network filter chain\")", f.GetName(), t, f.GetName())
			}
			if i == len(fs)-1 && !terminalNetwork[t] && strings.HasPrefix(t, "envoy.extensions.filters.network.") {
				report("envoy/network-filter-last", Error, p, "Envoy rejects the listener: the last network filter, %q (%s), does not end the chain (\"non-terminal filter named %s ... is the last filter in a network filter chain\")", f.GetName(), t, f.GetName())
			}
		}
	}
}

// envoyFilterChainMatches: no two filter chains of a listener may have
// the same filter_chain_match. Envoy rejects the listener: "error adding
// listener '0.0.0.0:443': multiple filter chains with the same matching
// rules are defined" (FilterChainManagerImpl::addFilterChains). With a
// filter_chain_matcher the matches are not used.
func envoyFilterChainMatches(typeURL string, m proto.Message, report reporter) {
	l, ok := m.(*listenerv3.Listener)
	if !ok || l.GetFilterChainMatcher() != nil {
		return
	}
	empty := &listenerv3.FilterChainMatch{}
	fcs := l.GetFilterChains()
	for i, fc := range fcs {
		a := fc.GetFilterChainMatch()
		if a == nil {
			a = empty
		}
		for j := 0; j < i; j++ {
			b := fcs[j].GetFilterChainMatch()
			if b == nil {
				b = empty
			}
			if proto.Equal(a, b) {
				report("envoy/filter-chain-match", Error, idx("filter_chains", i)+".filter_chain_match", "Envoy rejects the listener: filter chains %d and %d match the same connections (\"multiple filter chains with the same matching rules are defined\"); tell them apart with server_names, transport_protocol, application_protocols or the like", j, i)
				break
			}
		}
	}
}

// envoyNoFilterChains: a listener that is not an API listener needs a
// filter chain: Envoy rejects one with neither filter_chains nor a
// default_filter_chain ("error adding listener '...': no filter chains
// specified", ListenerImpl). UDP listeners are exempt.
func envoyNoFilterChains(typeURL string, m proto.Message, report reporter) {
	l, ok := m.(*listenerv3.Listener)
	if !ok || l.GetApiListener() != nil || l.GetUdpListenerConfig() != nil || l.GetInternalListener() != nil {
		return
	}
	if l.GetAddress().GetSocketAddress().GetProtocol() == corev3.SocketAddress_UDP {
		return
	}
	if len(l.GetFilterChains()) == 0 && l.GetDefaultFilterChain() == nil {
		report("envoy/no-filter-chains", Error, "filter_chains", "Envoy rejects the listener: it has no filter chains (\"no filter chains specified\"); give it filter_chains or a default_filter_chain")
	}
}

// envoyDomains: within a route configuration a domain (lowercased) may
// appear once, and "*" in one virtual host only. Envoy rejects the route
// configuration: "Only unique values for domains are permitted. Duplicate
// entry of domain X in route Y", "Only a single wildcard domain is
// permitted in route Y" (RouteMatcher, source/common/router/config_impl.cc).
func envoyDomains(typeURL string, m proto.Message, report reporter) {
	for _, rc := range routeConfigs(typeURL, m) {
		seen := map[string]string{}
		for i, vh := range rc.m.GetVirtualHosts() {
			for j, d := range vh.GetDomains() {
				d = strings.ToLower(d)
				p := join(rc.path, idx(idx("virtual_hosts", i)+".domains", j))
				if first, dup := seen[d]; dup {
					msg := fmt.Sprintf("Only unique values for domains are permitted. Duplicate entry of domain %s in route %s", d, rc.m.GetName())
					if d == "*" {
						msg = "Only a single wildcard domain is permitted in route " + rc.m.GetName()
					}
					report("envoy/duplicate-domain", Error, p, "Envoy rejects the route configuration: domain %q is also in %s (%q)", d, first, msg)
					continue
				}
				seen[d] = "virtual host " + strconv.Quote(vh.GetName())
			}
		}
	}
}

// envoyV2Types: Envoy dropped the v2 API in 1.18: an extension configured
// with a v2 type (envoy.config.filter.*, envoy.api.v2.*, ...) has no
// factory, and Envoy rejects the resource ("Didn't find a registered
// implementation for '...' with type URL: '...'", Config::Utility).
//
// It reads m's encoding, body, rather than m (protowalk.Anys): decoding
// every Any again to look inside took a sixth of an apply's time.
func envoyV2Types(m proto.Message, body []byte, report reporter) {
	protowalk.Anys(body, m.ProtoReflect().Descriptor(), func(url string, path func() string) {
		if t := typeName(url); isV2(t) {
			report("envoy/v2-type", Error, join(path(), "@type"), "Envoy rejects %s: it is a v2 API type, which Envoy removed in 1.18; use its v3 counterpart (envoy.extensions...v3)", t)
		}
	})
}

// isV2 reports whether a message is of Envoy's v2 API: in the envoy
// namespace, with no v3 version in its package.
func isV2(full string) bool {
	if !strings.HasPrefix(full, "envoy.") {
		return false
	}
	parts := strings.Split(full, ".")
	for _, p := range parts[:len(parts)-1] {
		if strings.HasPrefix(p, "v3") {
			return false
		}
	}
	return true
}

// listenings lists the addresses a listener binds: its address and
// additional addresses, unless it binds no port (bind_to_port false, port
// 0), which Envoy lets listeners share.
func listenings(e *refs.Entry, m proto.Message) []listening {
	l, ok := m.(*listenerv3.Listener)
	if !ok || l.GetApiListener() != nil || (l.GetBindToPort() != nil && !l.GetBindToPort().GetValue()) {
		return nil
	}
	var out []listening
	add := func(a *corev3.Address) {
		if sa := a.GetSocketAddress(); sa != nil && sa.GetPortValue() != 0 {
			proto := "tcp"
			if sa.GetProtocol() == corev3.SocketAddress_UDP {
				proto = "udp"
			}
			out = append(out, listening{e, proto + " " + sa.GetAddress() + ":" + strconv.Itoa(int(sa.GetPortValue()))})
		} else if p := a.GetPipe(); p != nil {
			out = append(out, listening{e, "unix " + p.GetPath()})
		}
	}
	add(l.GetAddress())
	for _, aa := range l.GetAdditionalAddresses() {
		add(aa.GetAddress())
	}
	return out
}
