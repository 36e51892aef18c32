package clientcheck

import (
	"strconv"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/resource"
)

// reporter records a finding at a field path of the resource.
type reporter func(rule string, sev Severity, path, format string, args ...any)

// rule checks one resource (its served type URL and payload).
type rule func(typeURL string, m proto.Message, report reporter)

// unpack decodes an Any, or returns nil.
func unpack(a *anypb.Any) proto.Message {
	if a == nil {
		return nil
	}
	m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
	if err != nil {
		return nil
	}
	return m
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// chain is a listener's filter chain and where it is.
type chain struct {
	fc   *listenerv3.FilterChain
	path string
}

// chains lists a listener's filter chains, the default one last.
func chains(l *listenerv3.Listener) []chain {
	var out []chain
	for i, fc := range l.GetFilterChains() {
		out = append(out, chain{fc, idx("filter_chains", i)})
	}
	if fc := l.GetDefaultFilterChain(); fc != nil {
		out = append(out, chain{fc, "default_filter_chain"})
	}
	return out
}

// hcm is an HTTP connection manager and where it is.
type hcm struct {
	m    *hcmv3.HttpConnectionManager
	path string
	api  bool // the listener's api_listener (a proxyless client's)
}

// hcms lists the HTTP connection managers of a resource: a listener's
// (API listener and filter chains), or an extension config's (ECDS).
func hcms(typeURL string, m proto.Message) []hcm {
	var out []hcm
	switch x := m.(type) {
	case *listenerv3.Listener:
		if h, ok := unpack(x.GetApiListener().GetApiListener()).(*hcmv3.HttpConnectionManager); ok {
			out = append(out, hcm{h, "api_listener.api_listener", true})
		}
		for _, c := range chains(x) {
			for j, f := range c.fc.GetFilters() {
				if h, ok := unpack(f.GetTypedConfig()).(*hcmv3.HttpConnectionManager); ok {
					out = append(out, hcm{h, idx(c.path+".filters", j) + ".typed_config", false})
				}
			}
		}
	default:
		if typeURL == resource.ExtensionConfigURL {
			if h, ok := unpack(extensionConfig(m)).(*hcmv3.HttpConnectionManager); ok {
				out = append(out, hcm{h, "typed_config", false})
			}
		}
	}
	return out
}

func extensionConfig(m proto.Message) *anypb.Any {
	type typed interface{ GetTypedConfig() *anypb.Any }
	if t, ok := m.(typed); ok {
		return t.GetTypedConfig()
	}
	return nil
}

// routeConfig is a route configuration and where it is.
type routeConfig struct {
	m      *routev3.RouteConfiguration
	path   string
	inline bool
}

// routeConfigs lists the route configurations of a resource: itself, or
// those inline in its HTTP connection managers.
func routeConfigs(typeURL string, m proto.Message) []routeConfig {
	if rc, ok := m.(*routev3.RouteConfiguration); ok {
		return []routeConfig{{rc, "", false}}
	}
	var out []routeConfig
	for _, h := range hcms(typeURL, m) {
		if rc := h.m.GetRouteConfig(); rc != nil {
			out = append(out, routeConfig{rc, h.path + ".route_config", true})
		}
	}
	return out
}

// virtualHost is a virtual host and where it is.
type virtualHost struct {
	m    *routev3.VirtualHost
	path string
}

// virtualHosts lists the virtual hosts of a resource: itself (VHDS), or
// those of its route configurations.
func virtualHosts(typeURL string, m proto.Message) []virtualHost {
	if vh, ok := m.(*routev3.VirtualHost); ok {
		return []virtualHost{{vh, ""}}
	}
	var out []virtualHost
	for _, rc := range routeConfigs(typeURL, m) {
		for i, vh := range rc.m.GetVirtualHosts() {
			out = append(out, virtualHost{vh, join(rc.path, idx("virtual_hosts", i))})
		}
	}
	return out
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// typeName is the full message name a type URL names.
func typeName(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}
