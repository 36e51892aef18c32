// Package envoyimport turns an Envoy bootstrap's static resources
// (listeners, clusters with their load assignments, secrets) into
// resources xdsd serves: a STATIC cluster's endpoints become a
// ClusterLoadAssignment served by EDS, every config source that fetched
// a resource from elsewhere becomes ADS (xdsd serves it now), static
// secrets become SDS resources, and with an authority every name becomes
// an xdstp:// name, the references between them rewritten.
//
// It imports resource and the Envoy API; `xdsd import` uses it.
package envoyimport

import (
	"fmt"
	"sort"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsd/xdsd/resource"
)

// Options tune the conversion.
type Options struct {
	// Authority, when set, renames every resource to
	// xdstp://Authority/<type>/<name>.
	Authority string
	// GRPC converts, where the meaning survives, what proxyless gRPC
	// refuses: a STRICT_DNS cluster of one host becomes LOGICAL_DNS
	// (gRPC resolves the host and uses every address, as Envoy's
	// STRICT_DNS does). What cannot be converted is left as it is, and
	// the checks of `xdsd import` name it.
	GRPC bool
}

// Result is what a bootstrap holds, as xdsd resources.
type Result struct {
	Listeners []*listenerv3.Listener
	Clusters  []*clusterv3.Cluster
	Endpoints []*endpointv3.ClusterLoadAssignment
	Secrets   []*tlsv3.Secret
	// Notes say what was changed that a reader should know of, and what
	// is missing.
	Notes []string
}

// Convert converts a bootstrap's static resources. The bootstrap is not
// modified.
func Convert(b *bootstrapv3.Bootstrap, o Options) (*Result, error) {
	b = proto.Clone(b).(*bootstrapv3.Bootstrap)
	sr := b.GetStaticResources()
	res := &Result{}
	c := converter{o: o, clusters: map[string]string{}, secrets: map[string]string{}, endpoints: map[string]string{}}

	// The clusters the bootstrap's own xDS configuration uses reach the
	// old management server: not imported.
	plumbing := map[string]bool{}
	for _, cs := range []*corev3.ConfigSource{b.GetDynamicResources().GetLdsConfig(), b.GetDynamicResources().GetCdsConfig()} {
		for _, n := range sourceClusters(cs.GetApiConfigSource()) {
			plumbing[n] = true
		}
	}
	for _, n := range sourceClusters(b.GetDynamicResources().GetAdsConfig()) {
		plumbing[n] = true
	}

	names := map[string]bool{}
	for _, cl := range sr.GetClusters() {
		if plumbing[cl.GetName()] {
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s is how the bootstrap reaches its management server: not imported", cl.GetName()))
			continue
		}
		if names[cl.GetName()] {
			return nil, fmt.Errorf("static_resources.clusters: %q appears twice", cl.GetName())
		}
		names[cl.GetName()] = true
		c.clusters[cl.GetName()] = c.rename(resource.ClusterURL, cl.GetName())
	}
	for _, s := range sr.GetSecrets() {
		c.secrets[s.GetName()] = c.rename(resource.SecretURL, s.GetName())
	}

	for _, cl := range sr.GetClusters() {
		if plumbing[cl.GetName()] {
			continue
		}
		old := cl.GetName()
		cl.Name = c.clusters[old]
		switch {
		case cl.GetClusterType() == nil && cl.GetType() == clusterv3.Cluster_STATIC && cl.GetLoadAssignment() != nil:
			// Its endpoints are served by EDS, so that every client
			// (proxyless gRPC takes only EDS clusters) can have them, and
			// they can change without the cluster.
			cla := cl.LoadAssignment
			cl.LoadAssignment = nil
			if n := localities(cla); n != "" {
				res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: %s", cl.Name, n))
			}
			cl.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
			eds := &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()}
			cla.ClusterName = c.rename(resource.EndpointURL, old)
			if cla.ClusterName != cl.Name {
				eds.ServiceName = cla.ClusterName
			}
			cl.EdsClusterConfig = eds
			c.endpoints[old] = cla.ClusterName
			res.Endpoints = append(res.Endpoints, cla)
		case cl.GetType() == clusterv3.Cluster_EDS:
			eds := cl.GetEdsClusterConfig()
			if eds == nil {
				eds = &clusterv3.Cluster_EdsClusterConfig{}
				cl.EdsClusterConfig = eds
			}
			svc := eds.GetServiceName()
			if svc == "" {
				svc = old
			}
			n := c.rename(resource.EndpointURL, svc)
			if n != cl.Name {
				eds.ServiceName = n
			}
			if cs := eds.GetEdsConfig(); cs.GetAds() == nil && cs.GetSelf() == nil {
				eds.EdsConfig = ads()
			}
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s takes its endpoints by EDS: they are not in the bootstrap; apply a ClusterLoadAssignment named %s", cl.Name, n))
		case o.GRPC && cl.GetClusterType() == nil && cl.GetType() == clusterv3.Cluster_STRICT_DNS && oneHost(cl.GetLoadAssignment()):
			cl.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}
			res.Notes = append(res.Notes, fmt.Sprintf("cluster %s: STRICT_DNS, which proxyless gRPC refuses, became LOGICAL_DNS: gRPC resolves its one host and balances over every address", cl.Name))
		}
		res.Clusters = append(res.Clusters, cl)
	}
	for _, l := range sr.GetListeners() {
		l.Name = c.rename(resource.ListenerURL, l.GetName())
		res.Listeners = append(res.Listeners, l)
	}
	for _, s := range sr.GetSecrets() {
		s.Name = c.secrets[s.GetName()]
		res.Secrets = append(res.Secrets, s)
	}

	for _, m := range res.messages() {
		c.rewrite(m.ProtoReflect())
	}
	res.Notes = append(res.Notes, c.notes()...)
	return res, nil
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}
}

// sourceClusters lists the clusters an API config source names.
func sourceClusters(a *corev3.ApiConfigSource) []string {
	out := append([]string(nil), a.GetClusterNames()...)
	for _, g := range a.GetGrpcServices() {
		if n := g.GetEnvoyGrpc().GetClusterName(); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (r *Result) messages() []proto.Message {
	var out []proto.Message
	for _, l := range r.Listeners {
		out = append(out, l)
	}
	for _, c := range r.Clusters {
		out = append(out, c)
	}
	for _, e := range r.Endpoints {
		out = append(out, e)
	}
	for _, s := range r.Secrets {
		out = append(out, s)
	}
	return out
}

type converter struct {
	o         Options
	clusters  map[string]string // old name → new
	secrets   map[string]string
	endpoints map[string]string
	rds       map[string]bool // route configurations named by RDS: not in the bootstrap
	unknown   map[string]bool // clusters referenced but not imported
}

// rename gives a name its xdstp:// form when an authority is set.
func (c *converter) rename(typeURL, n string) string {
	if c.o.Authority == "" || strings.HasPrefix(n, "xdstp:") {
		return n
	}
	return "xdstp://" + c.o.Authority + "/" + strings.TrimPrefix(typeURL, resource.TypePrefix) + "/" + n
}

// cluster rewrites a reference to a cluster.
func (c *converter) cluster(n string) string {
	if nn, ok := c.clusters[n]; ok {
		return nn
	}
	if n != "" {
		if c.unknown == nil {
			c.unknown = map[string]bool{}
		}
		c.unknown[n] = true
	}
	return n
}

// rewrite fixes the references of m to the new names, and the config
// sources that fetched from elsewhere, looking into Any values.
func (c *converter) rewrite(m protoreflect.Message) {
	switch x := m.Interface().(type) {
	case *routev3.RouteAction:
		if cl := x.GetCluster(); cl != "" {
			x.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: c.cluster(cl)}
		}
		for _, w := range x.GetWeightedClusters().GetClusters() {
			w.Name = c.cluster(w.GetName())
		}
		for _, p := range x.GetRequestMirrorPolicies() {
			p.Cluster = c.cluster(p.GetCluster())
		}
	case *tcpproxyv3.TcpProxy:
		if cl := x.GetCluster(); cl != "" {
			x.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: c.cluster(cl)}
		}
		for _, w := range x.GetWeightedClusters().GetClusters() {
			w.Name = c.cluster(w.GetName())
		}
	case *aggregatev3.ClusterConfig:
		for i, n := range x.Clusters {
			x.Clusters[i] = c.cluster(n)
		}
	case *corev3.GrpcService_EnvoyGrpc:
		x.ClusterName = c.cluster(x.GetClusterName())
	case *corev3.HttpUri:
		if cl := x.GetCluster(); cl != "" {
			x.HttpUpstreamType = &corev3.HttpUri_Cluster{Cluster: c.cluster(cl)}
		}
	case *tlsv3.SdsSecretConfig:
		if nn, ok := c.secrets[x.GetName()]; ok && x.GetSdsConfig() == nil {
			// A static secret, now served by SDS.
			x.Name, x.SdsConfig = nn, ads()
		}
	case *hcmv3.Rds:
		if cs := x.GetConfigSource(); cs.GetAds() == nil && cs.GetSelf() == nil {
			x.ConfigSource = ads()
		}
		// Not in the bootstrap, but in the authority too once applied.
		x.RouteConfigName = c.rename(resource.RouteURL, x.GetRouteConfigName())
		if c.rds == nil {
			c.rds = map[string]bool{}
		}
		c.rds[x.GetRouteConfigName()] = true
	case *corev3.ExtensionConfigSource:
		if cs := x.GetConfigSource(); cs.GetAds() == nil && cs.GetSelf() == nil {
			x.ConfigSource = ads()
		}
	case *anypb.Any:
		inner, err := x.UnmarshalNew()
		if err != nil {
			return // a type this binary does not know: left as it is
		}
		before, _ := resource.Marshal(inner)
		c.rewrite(inner.ProtoReflect())
		if after, _ := resource.Marshal(inner); string(after) != string(before) {
			x.Value = after
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				c.rewrite(l.Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				c.rewrite(mv.Message())
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			c.rewrite(v.Message())
		}
		return true
	})
}

func (c *converter) notes() []string {
	var out []string
	for _, n := range sortedKeys(c.rds) {
		out = append(out, fmt.Sprintf("route configuration %s is fetched by RDS: it is not in the bootstrap; apply it too (the listener now fetches it by ADS)", n))
	}
	for _, n := range sortedKeys(c.unknown) {
		out = append(out, fmt.Sprintf("cluster %s is referenced but is not a static cluster of the bootstrap", n))
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Files are the documents, YAML, by the file name `xdsd import -o` gives
// them: listeners.yaml, clusters.yaml, endpoints.yaml and secrets.yaml,
// those that hold something, in that order.
func (r *Result) Files() ([]File, error) {
	var out []File
	for _, f := range []struct {
		name string
		ms   []proto.Message
	}{
		{"listeners.yaml", messagesOf(r.Listeners)},
		{"clusters.yaml", messagesOf(r.Clusters)},
		{"endpoints.yaml", messagesOf(r.Endpoints)},
		{"secrets.yaml", messagesOf(r.Secrets)},
	} {
		if len(f.ms) == 0 {
			continue
		}
		var b strings.Builder
		for i, m := range f.ms {
			y, err := documentYAML(m)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteString("---\n")
			}
			b.Write(y)
		}
		out = append(out, File{Name: f.name, Data: []byte(b.String())})
	}
	return out, nil
}

// File is one output file.
type File struct {
	Name string
	Data []byte
}

func messagesOf[M proto.Message](ms []M) []proto.Message {
	out := make([]proto.Message, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// documentYAML writes a resource as a bare authoring document: "@type"
// first, then its fields in the order of the proto.
func documentYAML(m proto.Message) ([]byte, error) {
	a, err := anypb.New(m)
	if err != nil {
		return nil, err
	}
	js, err := marshalJSON(a)
	if err != nil {
		return nil, err
	}
	return resource.JSONToYAML(js)
}

// marshalJSON writes a message in the authoring format's field names.
func marshalJSON(m proto.Message) ([]byte, error) {
	return protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
}

// localities makes a STATIC cluster's endpoints, now served by EDS, ones
// proxyless gRPC takes (gRFC A27) without changing what Envoy does with
// them: gRPC rejects a locality entry without its locality field and
// ignores one whose load_balancing_weight is unset. When no entry has a
// weight (Envoy then balances over endpoints, not localities), the
// entries without a locality at one priority become one entry with the
// empty locality (two would be a duplicate locality to gRPC), and every
// entry gets weight 1. When some entries have weights, Envoy's locality
// weighting is in use and is kept: it returns a note naming what gRPC
// will ignore.
func localities(cla *endpointv3.ClusterLoadAssignment) string {
	weighted := false
	for _, l := range cla.GetEndpoints() {
		if l.GetLoadBalancingWeight().GetValue() > 0 {
			weighted = true
		}
	}
	if weighted {
		var unweighted int
		for _, l := range cla.GetEndpoints() {
			if l.GetLocality() == nil {
				l.Locality = &corev3.Locality{}
			}
			if l.GetLoadBalancingWeight().GetValue() == 0 {
				unweighted++
			}
		}
		if unweighted > 0 {
			return fmt.Sprintf("%d of its %d localities have no load_balancing_weight while others have one: Envoy and proxyless gRPC send them nothing", unweighted, len(cla.GetEndpoints()))
		}
		return ""
	}
	var out []*endpointv3.LocalityLbEndpoints
	bare := map[uint32]*endpointv3.LocalityLbEndpoints{} // priority → the merged entry without a locality
	for _, l := range cla.GetEndpoints() {
		if l.GetLocality() == nil {
			if m := bare[l.GetPriority()]; m != nil {
				m.LbEndpoints = append(m.LbEndpoints, l.GetLbEndpoints()...)
				continue
			}
			l.Locality = &corev3.Locality{}
			bare[l.GetPriority()] = l
		}
		l.LoadBalancingWeight = wrapperspb.UInt32(1)
		out = append(out, l)
	}
	cla.Endpoints = out
	return ""
}

// oneHost says a cluster's load assignment names exactly one endpoint,
// what a LOGICAL_DNS cluster takes.
func oneHost(cla *endpointv3.ClusterLoadAssignment) bool {
	n := 0
	for _, l := range cla.GetEndpoints() {
		n += len(l.GetLbEndpoints())
	}
	return len(cla.GetEndpoints()) == 1 && n == 1
}
