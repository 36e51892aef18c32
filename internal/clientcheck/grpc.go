package clientcheck

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
)

// grpcRules are what a proxyless gRPC client (grpc-go, and gRPC C++ and
// Java, which follow the same gRFCs) refuses when it validates a
// resource: it NACKs it (gRFC A27, "xDS-Based Global Load Balancing").
// The messages quote grpc-go's (internal/xds/xdsclient/xdsresource).
var grpcRules = []rule{grpcListener, grpcHTTPFilters, grpcRoutes, grpcCluster, grpcEndpoints}

// grpcListener: a client's listener is an API listener holding an
// HttpConnectionManager, whose routes come by RDS over ADS (or self) or
// inline (gRFC A27); a listener without api_listener is a server's (gRFC
// A36), which needs an address and takes no listener filters.
func grpcListener(typeURL string, m proto.Message, report reporter) {
	l, ok := m.(*listenerv3.Listener)
	if !ok {
		return
	}
	if api := l.GetApiListener(); api != nil {
		inner := unpack(api.GetApiListener())
		h, ok := inner.(*hcmv3.HttpConnectionManager)
		if !ok {
			report("grpc/api-listener", Error, "api_listener.api_listener", "gRPC rejects the listener: its api_listener must hold an envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager (\"unexpected http connection manager resource type\")")
			return
		}
		const p = "api_listener.api_listener"
		switch rs := h.GetRouteSpecifier().(type) {
		case *hcmv3.HttpConnectionManager_Rds:
			if cs := rs.Rds.GetConfigSource(); cs.GetAds() == nil && cs.GetSelf() == nil {
				report("grpc/rds-source", Error, p+".rds.config_source", "gRPC rejects the listener: RDS must come from the same server, config_source {ads: {}} or {self: {}} (\"LDS's RDS configSource is not ADS or Self\")")
			}
		case *hcmv3.HttpConnectionManager_RouteConfig:
		default:
			report("grpc/route-specifier", Error, p, "gRPC rejects the listener: the HTTP connection manager needs rds or an inline route_config (scoped routes are not supported) (\"unsupported type ... for RouteSpecifier\")")
		}
		if h.GetXffNumTrustedHops() != 0 {
			report("grpc/hcm-fields", Error, p+".xff_num_trusted_hops", "gRPC rejects the listener: xff_num_trusted_hops must be unset or zero")
		}
		if len(h.GetOriginalIpDetectionExtensions()) > 0 {
			report("grpc/hcm-fields", Error, p+".original_ip_detection_extensions", "gRPC rejects the listener: original_ip_detection_extensions must be empty")
		}
		return
	}
	// A server listener (gRFC A36).
	if l.GetAddress().GetSocketAddress() == nil {
		report("grpc/server-listener", Error, "address", "gRPC rejects the listener: without api_listener it is a server's listener (gRFC A36), which needs address.socket_address (\"no address field in LDS response\"); a client's listener needs api_listener")
	}
	if n := len(l.GetListenerFilters()); n > 0 {
		report("grpc/server-listener", Error, "listener_filters", "gRPC rejects the listener: a server listener takes no listener_filters (\"unsupported field 'listener_filters' contains %d entries\")", n)
	}
	if l.GetUseOriginalDst().GetValue() {
		report("grpc/server-listener", Error, "use_original_dst", "gRPC rejects the listener: use_original_dst is not supported")
	}
	for _, c := range chains(l) {
		for i, f := range c.fc.GetFilters() {
			if _, ok := unpack(f.GetTypedConfig()).(*hcmv3.HttpConnectionManager); !ok {
				report("grpc/server-listener", Error, idx(c.path+".filters", i), "gRPC rejects the listener: the only network filter a gRPC server takes is the HTTP connection manager (\"unsupported network filter\")")
			}
		}
	}
}

// The HTTP filters grpc-go has (internal/xds/httpfilter), on each side.
var (
	grpcFilters = map[string]bool{
		"envoy.extensions.filters.http.router.v3.Router":                  true,
		"envoy.extensions.filters.http.fault.v3.HTTPFault":                true,
		"envoy.extensions.filters.http.gcp_authn.v3.GcpAuthnFilterConfig": true,
		"envoy.extensions.filters.http.rbac.v3.RBAC":                      true,
	}
	grpcClientFilters = map[string]bool{
		"envoy.extensions.filters.http.router.v3.Router":                  true,
		"envoy.extensions.filters.http.fault.v3.HTTPFault":                true, // gRFC A33
		"envoy.extensions.filters.http.gcp_authn.v3.GcpAuthnFilterConfig": true, // gRFC A83
	}
	grpcServerFilters = map[string]bool{
		"envoy.extensions.filters.http.router.v3.Router": true,
		"envoy.extensions.filters.http.rbac.v3.RBAC":     true, // gRFC A41
	}
)

// grpcHTTPFilters: the HTTP filters of a gRPC client or server (gRFC
// A39): a non-empty list, each named once, each a filter the gRPC side
// supports unless marked is_optional, ending with the router and nowhere
// else ("http filters list is empty", "duplicate filter name", "HTTP filter
// %q not supported client-side", "http filter %q is a terminal filter but
// it is not last in the filter chain").
func grpcHTTPFilters(typeURL string, m proto.Message, report reporter) {
	for _, h := range hcms(typeURL, m) {
		supported, side := grpcServerFilters, "server"
		if h.api {
			supported, side = grpcClientFilters, "client"
		}
		var kept []*hcmv3.HttpFilter
		var keptAt []string
		names := map[string]bool{}
		for i, f := range h.m.GetHttpFilters() {
			p := h.path + "." + idx("http_filters", i)
			if names[f.GetName()] {
				report("grpc/http-filters", Error, p+".name", "gRPC rejects the listener: HTTP filter name %q is used twice (\"duplicate filter name\")", f.GetName())
			}
			names[f.GetName()] = true
			t := typeName(f.GetTypedConfig().GetTypeUrl())
			if f.GetConfigDiscovery() != nil {
				t = "" // ECDS: gRPC takes filters inline only
			}
			if strings.HasSuffix(t, ".TypedStruct") {
				t = "" // its type is inside; grpc-go looks it up the same way
			}
			if !supported[t] {
				if f.GetIsOptional() {
					continue
				}
				switch {
				case grpcFilters[t]:
					report("grpc/http-filters", Error, p, "gRPC rejects the listener: HTTP filter %q (%s) is not one a gRPC %s supports; mark it is_optional to have gRPC skip it (\"HTTP filter %q not supported %s-side\")", f.GetName(), t, side, f.GetName(), side)
				case t == "":
					report("grpc/http-filters", Error, p, "gRPC rejects the listener: HTTP filter %q is configured by ECDS or a TypedStruct, which gRPC cannot look into; give its typed_config, or mark it is_optional", f.GetName())
				default:
					report("grpc/http-filters", Error, p, "gRPC rejects the listener: gRPC has no HTTP filter %s; mark %q is_optional to have gRPC skip it (\"no filter implementation found for %q\")", t, f.GetName(), f.GetTypedConfig().GetTypeUrl())
				}
				continue
			}
			kept = append(kept, f)
			keptAt = append(keptAt, p)
		}
		if len(kept) == 0 {
			report("grpc/http-filters", Error, h.path+".http_filters", "gRPC rejects the listener: http_filters must end with the router (envoy.extensions.filters.http.router.v3.Router) (\"http filters list is empty\")")
			continue
		}
		for i, f := range kept {
			router := typeName(f.GetTypedConfig().GetTypeUrl()) == "envoy.extensions.filters.http.router.v3.Router"
			if router && i < len(kept)-1 {
				report("grpc/http-filters", Error, keptAt[i], "gRPC rejects the listener: the router must be the last HTTP filter (\"http filter %q is a terminal filter but it is not last in the filter chain\")", f.GetName())
			}
			if !router && i == len(kept)-1 {
				report("grpc/http-filters", Error, keptAt[i], "gRPC rejects the listener: the last HTTP filter must be the router (\"http filter %q is not a terminal filter\")", f.GetName())
			}
		}
	}
}

// grpcRoutes: what gRPC takes of routes (gRFC A28): a path matched by
// prefix, path or safe_regex (RE2, as Go's regexp reads it); weighted
// clusters with a positive total weight that fits in 32 bits; a cluster
// specifier plugin the route configuration defines; retry policies with
// at least one retry and positive backoffs (gRFC A44). Routes gRPC cannot
// use (by query parameters, or to cluster_header) are skipped: a warning.
func grpcRoutes(typeURL string, m proto.Message, report reporter) {
	plugins := map[string]bool{}
	for _, rc := range routeConfigs(typeURL, m) {
		for _, p := range rc.m.GetClusterSpecifierPlugins() {
			plugins[p.GetExtension().GetName()] = true
		}
	}
	for _, vh := range virtualHosts(typeURL, m) {
		for i, r := range vh.m.GetRoutes() {
			p := join(vh.path, idx("routes", i))
			grpcRoute(r, p, plugins, report)
		}
	}
}

func grpcRoute(r *routev3.Route, p string, plugins map[string]bool, report reporter) {
	match := r.GetMatch()
	if len(match.GetQueryParameters()) > 0 {
		report("grpc/route-ignored", Warning, p+".match.query_parameters", "gRPC ignores this route: it does not match on query parameters")
		return
	}
	switch ps := match.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix, *routev3.RouteMatch_Path:
	case *routev3.RouteMatch_SafeRegex:
		if _, err := regexp.Compile(ps.SafeRegex.GetRegex()); err != nil {
			report("grpc/route-match", Error, p+".match.safe_regex.regex", "gRPC rejects the route configuration: %q is not a regular expression it reads (RE2): %v (\"contains an invalid regex\")", ps.SafeRegex.GetRegex(), err)
		}
	default:
		report("grpc/route-match", Error, p+".match", "gRPC rejects the route configuration: a route must match the path by prefix, path or safe_regex (\"has an unrecognized path specifier\")")
	}
	for i, h := range match.GetHeaders() {
		//lint:ignore SA1019 deprecated in the API, still written and still read by gRPC
		re, field := h.GetSafeRegexMatch(), ".safe_regex_match.regex"
		if re == nil {
			re, field = h.GetStringMatch().GetSafeRegex(), ".string_match.safe_regex.regex"
		}
		if re != nil {
			if _, err := regexp.Compile(re.GetRegex()); err != nil {
				report("grpc/route-match", Error, idx(p+".match.headers", i)+field, "gRPC rejects the route configuration: %q is not a regular expression it reads (RE2): %v (\"contains an invalid regex\")", re.GetRegex(), err)
			}
		}
	}
	a := r.GetRoute()
	if a == nil {
		return // non_forwarding_action (a server's), or a route gRPC skips
	}
	switch cs := a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_WeightedClusters:
		var total uint64
		for _, c := range cs.WeightedClusters.GetClusters() {
			total += uint64(c.GetWeight().GetValue())
		}
		switch {
		case total == 0:
			report("grpc/weighted-clusters", Error, p+".route.weighted_clusters", "gRPC rejects the route configuration: the weighted clusters' weights add up to zero (\"has no valid cluster in WeightedCluster action\")")
		case total > math.MaxUint32:
			report("grpc/weighted-clusters", Error, p+".route.weighted_clusters", "gRPC rejects the route configuration: the weighted clusters' weights add up to more than 2^32-1 (\"total weight of clusters exceeds MaxUint32\")")
		}
	case *routev3.RouteAction_ClusterSpecifierPlugin:
		if !plugins[cs.ClusterSpecifierPlugin] {
			report("grpc/cluster-specifier-plugin", Error, p+".route.cluster_specifier_plugin", "gRPC rejects the route configuration: cluster specifier plugin %q is not in the route configuration's cluster_specifier_plugins", cs.ClusterSpecifierPlugin)
		}
	case *routev3.RouteAction_ClusterHeader:
		report("grpc/route-ignored", Warning, p+".route.cluster_header", "gRPC ignores this route: it does not route by cluster_header")
	}
	if rp := a.GetRetryPolicy(); rp != nil {
		if n := rp.GetNumRetries(); n != nil && n.GetValue() < 1 {
			report("grpc/retry-policy", Error, p+".route.retry_policy.num_retries", "gRPC rejects the route configuration: num_retries must be at least 1 (gRFC A44, \"retry_policy.num_retries = 0; must be >= 1\")")
		}
		if b := rp.GetRetryBackOff(); b != nil {
			if b.GetBaseInterval().AsDuration() <= 0 {
				report("grpc/retry-policy", Error, p+".route.retry_policy.retry_back_off.base_interval", "gRPC rejects the route configuration: the retry back-off's base_interval must be positive (gRFC A44)")
			}
			if mi := b.GetMaxInterval(); mi != nil && mi.AsDuration() <= 0 {
				report("grpc/retry-policy", Error, p+".route.retry_policy.retry_back_off.max_interval", "gRPC rejects the route configuration: the retry back-off's max_interval must be positive (gRFC A44)")
			}
		}
	}
}

// grpcCluster: the clusters gRPC takes: EDS over ADS or self (gRFC A27),
// with eds_cluster_config.service_name when the cluster's name is an
// xdstp:// name (gRFC A47); LOGICAL_DNS with one endpoint, and aggregate
// clusters (gRFC A37); load balancing by ROUND_ROBIN, RING_HASH with
// xxHash (gRFC A42) or LEAST_REQUEST (gRFC A48);
// load reports to the same server only; no transport_socket_matches (gRFC
// A29).
func grpcCluster(typeURL string, m proto.Message, report reporter) {
	c, ok := m.(*clusterv3.Cluster)
	if !ok {
		return
	}
	switch c.GetLbPolicy() {
	case clusterv3.Cluster_ROUND_ROBIN:
	case clusterv3.Cluster_RING_HASH:
		if c.GetRingHashLbConfig().GetHashFunction() != clusterv3.Cluster_RingHashLbConfig_XX_HASH {
			report("grpc/lb-policy", Error, "ring_hash_lb_config.hash_function", "gRPC rejects the cluster: ring hash must use XX_HASH (gRFC A42, \"unsupported ring_hash hash function\")")
		}
	case clusterv3.Cluster_LEAST_REQUEST: // gRFC A48; choice_count >= 2 is the schema's
	default:
		report("grpc/lb-policy", Error, "lb_policy", "gRPC rejects the cluster: lb_policy %s is not one it has; use ROUND_ROBIN, RING_HASH or LEAST_REQUEST (\"unexpected lbPolicy %s in response\")", c.GetLbPolicy(), c.GetLbPolicy())
	}
	if lrs := c.GetLrsServer(); lrs != nil && lrs.GetSelf() == nil {
		report("grpc/cluster-fields", Error, "lrs_server", "gRPC rejects the cluster: lrs_server must be {self: {}} (\"unsupported config_source_specifier in lrs_server field\")")
	}
	if len(c.GetTransportSocketMatches()) > 0 {
		report("grpc/cluster-fields", Error, "transport_socket_matches", "gRPC rejects the cluster: transport_socket_matches is not supported (\"unsupported transport_socket_matches field is non-empty\")")
	}
	switch {
	case c.GetType() == clusterv3.Cluster_EDS:
		if cs := c.GetEdsClusterConfig().GetEdsConfig(); cs.GetAds() == nil && cs.GetSelf() == nil {
			report("grpc/cluster-type", Error, "eds_cluster_config.eds_config", "gRPC rejects the cluster: its endpoints must come from the same server, eds_config {ads: {}} or {self: {}} (\"CDS's EDS config source is not ADS or Self\")")
		}
		if strings.HasPrefix(c.GetName(), "xdstp:") && c.GetEdsClusterConfig().GetServiceName() == "" {
			report("grpc/cluster-type", Error, "eds_cluster_config.service_name", "gRPC rejects the cluster: a cluster with an xdstp:// name must name its endpoints in eds_cluster_config.service_name (\"CDS's EDS service name is not set with a new-style cluster name\")")
		}
	case c.GetType() == clusterv3.Cluster_LOGICAL_DNS:
		eps := c.GetLoadAssignment().GetEndpoints()
		if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 || eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() == 0 {
			report("grpc/cluster-type", Error, "load_assignment", "gRPC rejects the cluster: a LOGICAL_DNS cluster needs a load_assignment with exactly one locality holding one endpoint with a host and port (gRFC A37)")
		}
	case c.GetClusterType().GetName() == "envoy.clusters.aggregate":
		if cc, ok := unpack(c.GetClusterType().GetTypedConfig()).(*aggregatev3.ClusterConfig); !ok || len(cc.GetClusters()) == 0 {
			report("grpc/cluster-type", Error, "cluster_type.typed_config", "gRPC rejects the cluster: an aggregate cluster must list its clusters (gRFC A37)")
		}
	default:
		what := c.GetType().String()
		if ct := c.GetClusterType(); ct != nil {
			what = ct.GetName()
		}
		report("grpc/cluster-type", Error, "type", "gRPC rejects the cluster: %s clusters are not supported; use EDS (or LOGICAL_DNS, or an aggregate cluster) (\"unsupported cluster type\")", what)
	}
}

// grpcEndpoints: what gRPC takes of endpoints (gRFC A27): every locality
// identified, once per priority, the priorities numbered from 0 without
// gaps; each endpoint address once, and a weight, when given, of at least
// 1. A locality without a weight (or weight 0) is ignored: a warning.
func grpcEndpoints(typeURL string, m proto.Message, report reporter) {
	cla, ok := m.(*endpointv3.ClusterLoadAssignment)
	if !ok {
		return
	}
	addrs := map[string]bool{}
	localities := map[uint32]map[string]bool{}
	for i, le := range cla.GetEndpoints() {
		p := idx("endpoints", i)
		l := le.GetLocality()
		if l == nil {
			report("grpc/endpoints", Error, p, "gRPC rejects the endpoints: every locality needs its locality field ({} will do) (\"EDS response contains a locality without ID\")")
			continue
		}
		if le.GetLoadBalancingWeight().GetValue() == 0 {
			report("grpc/locality-weight", Warning, p+".load_balancing_weight", "gRPC ignores this locality: its load_balancing_weight is unset or 0 (set it to 1 or more)")
			continue
		}
		id := l.GetRegion() + "/" + l.GetZone() + "/" + l.GetSubZone()
		prio := le.GetPriority()
		if localities[prio] == nil {
			localities[prio] = map[string]bool{}
		}
		if localities[prio][id] {
			report("grpc/endpoints", Error, p+".locality", "gRPC rejects the endpoints: locality %s appears twice at priority %d (\"duplicate locality\")", id, prio)
		}
		localities[prio][id] = true
		for j, lb := range le.GetLbEndpoints() {
			q := idx(p+".lb_endpoints", j)
			if w := lb.GetLoadBalancingWeight(); w != nil && w.GetValue() == 0 {
				report("grpc/endpoints", Error, q+".load_balancing_weight", "gRPC rejects the endpoints: an endpoint's load_balancing_weight, when set, must be at least 1 (\"EDS response contains an endpoint with zero weight\")")
			}
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			a := sa.GetAddress() + ":" + strconv.Itoa(int(sa.GetPortValue()))
			if addrs[a] {
				report("grpc/endpoints", Error, q+".endpoint.address", "gRPC rejects the endpoints: address %s is listed twice (\"duplicate endpoint with the same address\")", a)
			}
			addrs[a] = true
		}
	}
	for prio := range uint32(len(localities)) {
		if localities[prio] == nil {
			report("grpc/endpoints", Error, "endpoints", "gRPC rejects the endpoints: priorities must be numbered from 0 without gaps, and priority %d has no locality (\"priority %d missing\")", prio, prio)
			break
		}
	}
}
