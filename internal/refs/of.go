package refs

import (
	"strconv"
	"strings"
	"sync"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Ref is one reference from a resource to another.
type Ref struct {
	// Type is the type URL of the resource referenced.
	Type string
	// Name is its canonical name.
	Name string
	// Path is the field path of the reference in the referring resource,
	// e.g. virtual_hosts[0].routes[1].route.cluster.
	Path string
	// Strict is true when Envoy rejects the referring resource if the
	// target is missing, rather than waiting for it or failing requests:
	// a route configuration's clusters with validate_clusters, which is
	// on by default for one inline in a listener (the Envoy docs of
	// RouteConfiguration.validate_clusters).
	Strict bool
}

// Of lists the references a resource's payload makes that a client
// follows over ADS, in the order they appear. The contents of
// google.protobuf.Any values (typed_config) are looked into.
func Of(m proto.Message) []Ref { return OfDecoding(m, nil) }

// OfDecoding is Of, with the contents of each Any value decoded by
// unpack (nil: anypb.UnmarshalNew), such as docprep.Anys.Unpack, which
// has those validation decoded already.
func OfDecoding(m proto.Message, unpack func(*anypb.Any) (proto.Message, error)) []Ref {
	if m == nil {
		return nil
	}
	w := walker{unpack: unpack}
	w.message(m.ProtoReflect(), true)
	return w.out
}

type walker struct {
	unpack func(*anypb.Any) (proto.Message, error)
	out    []Ref
	segs   []string
	strict bool // inside a route configuration that validates its clusters
}

// paths interns reference paths: a batch of 100,000 clusters has as many
// references, nearly all with the same few paths, and each kept its own
// copy (3 MB). Bounded, so that paths with many distinct indices do not
// grow it without end.
var paths struct {
	sync.Mutex
	m map[string]string
}

const maxInterned = 4096

func intern(s string) string {
	paths.Lock()
	defer paths.Unlock()
	if p, ok := paths.m[s]; ok {
		return p
	}
	if paths.m == nil {
		paths.m = map[string]string{}
	}
	if len(paths.m) < maxInterned {
		paths.m[s] = s
	}
	return s
}

func (w *walker) path(field string) string { return intern(w.buildPath(field)) }

func (w *walker) buildPath(field string) string {
	var b strings.Builder
	for _, s := range w.segs {
		if s[0] != '[' && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	if field != "" {
		if field[0] != '[' && b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(field)
	}
	return b.String()
}

func (w *walker) add(typeURL, n, field string, strict bool) {
	if n == "" {
		return
	}
	if c, err := resource.CanonicalName(n); err == nil {
		n = c
	}
	w.out = append(w.out, Ref{Type: typeURL, Name: n, Path: w.path(field), Strict: strict})
}

// served reports whether a client gets what a config source names over
// its ADS stream: an xdstp:// name is found through its authority
// whatever the config source says (xRFC TP1); a legacy name only when the
// source is ads or self.
func served(cs *corev3.ConfigSource, n string) bool {
	return strings.HasPrefix(n, "xdstp:") || cs.GetAds() != nil || cs.GetSelf() != nil
}

// message collects the references m makes, then those of the messages
// inside it. top is true for the resource itself.
func (w *walker) message(m protoreflect.Message, top bool) {
	switch x := m.Interface().(type) {
	case *hcmv3.HttpConnectionManager:
		if rds := x.GetRds(); rds != nil && served(rds.GetConfigSource(), rds.GetRouteConfigName()) {
			w.add(resource.RouteURL, rds.GetRouteConfigName(), "rds.route_config_name", false)
		}
	case *hcmv3.HttpFilter:
		w.discovery(x.GetConfigDiscovery(), x.GetName())
	case *listenerv3.Filter:
		w.discovery(x.GetConfigDiscovery(), x.GetName())
	case *listenerv3.ListenerFilter:
		w.discovery(x.GetConfigDiscovery(), x.GetName())
	case *routev3.RouteConfiguration:
		// validate_clusters defaults to true for a route configuration
		// inline in a listener, false for one delivered by RDS.
		defer func(s bool) { w.strict = s }(w.strict)
		w.strict = !top
		if v := x.GetValidateClusters(); v != nil {
			w.strict = v.GetValue()
		}
	case *routev3.RouteAction:
		w.add(resource.ClusterURL, x.GetCluster(), "cluster", w.strict)
		for i, c := range x.GetWeightedClusters().GetClusters() {
			w.add(resource.ClusterURL, c.GetName(), "weighted_clusters.clusters["+strconv.Itoa(i)+"].name", w.strict)
		}
		for i, p := range x.GetRequestMirrorPolicies() {
			w.add(resource.ClusterURL, p.GetCluster(), "request_mirror_policies["+strconv.Itoa(i)+"].cluster", w.strict)
		}
	case *tcpproxyv3.TcpProxy:
		w.add(resource.ClusterURL, x.GetCluster(), "cluster", false)
		for i, c := range x.GetWeightedClusters().GetClusters() {
			w.add(resource.ClusterURL, c.GetName(), "weighted_clusters.clusters["+strconv.Itoa(i)+"].name", false)
		}
	case *tlsv3.SdsSecretConfig:
		if cs := x.GetSdsConfig(); cs != nil && served(cs, x.GetName()) {
			w.add(resource.SecretURL, x.GetName(), "name", false)
		}
	case *clusterv3.Cluster:
		if x.GetType() == clusterv3.Cluster_EDS {
			eds := x.GetEdsClusterConfig()
			n, field := eds.GetServiceName(), "eds_cluster_config.service_name"
			if n == "" {
				n, field = x.GetName(), "name"
			}
			if served(eds.GetEdsConfig(), n) {
				w.add(resource.EndpointURL, n, field, false)
			}
		}
	case *aggregatev3.ClusterConfig:
		for i, c := range x.GetClusters() {
			w.add(resource.ClusterURL, c, "clusters["+strconv.Itoa(i)+"]", false)
		}
	case *routev3.ScopedRouteConfiguration:
		w.add(resource.RouteURL, x.GetRouteConfigurationName(), "route_configuration_name", false)
	case *xdscorev3.ResourceLocator:
		// A redirect, or a collection's entry.
		if n, err := name.FromLocator(x); err == nil && !n.Glob {
			w.add(resource.TypePrefix+n.Type, n.String(), "", false)
		}
		return
	case *anypb.Any:
		unpack := w.unpack
		if unpack == nil {
			unpack = func(a *anypb.Any) (proto.Message, error) {
				return anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
			}
		}
		if inner, err := unpack(x); err == nil {
			w.message(inner.ProtoReflect(), false)
		}
		return
	}
	w.fields(m)
}

// discovery adds the extension config a filter takes by ECDS.
func (w *walker) discovery(cd *corev3.ExtensionConfigSource, n string) {
	if cd != nil && served(cd.GetConfigSource(), n) {
		w.add(resource.ExtensionConfigURL, n, "name", false)
	}
}

// fields walks the message fields of m that can lead to a reference.
func (w *walker) fields(m protoreflect.Message) {
	for _, fd := range leads(m.Descriptor()) {
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		w.segs = append(w.segs, string(fd.Name()))
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				w.segs = append(w.segs, "["+strconv.Itoa(i)+"]")
				w.message(l.Get(i).Message(), false)
				w.segs = w.segs[:len(w.segs)-1]
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				w.segs = append(w.segs, "["+strconv.Quote(k.String())+"]")
				w.message(mv.Message(), false)
				w.segs = w.segs[:len(w.segs)-1]
				return true
			})
		default:
			w.message(v.Message(), false)
		}
		w.segs = w.segs[:len(w.segs)-1]
	}
}

// refTypes are the messages that make references, and google.protobuf.Any,
// which can hold any of them.
var refTypes = map[protoreflect.FullName]bool{}

func init() {
	for _, m := range []proto.Message{
		&hcmv3.HttpConnectionManager{}, &hcmv3.HttpFilter{}, &listenerv3.Filter{}, &listenerv3.ListenerFilter{},
		&routev3.RouteConfiguration{}, &routev3.RouteAction{}, &tcpproxyv3.TcpProxy{}, &tlsv3.SdsSecretConfig{},
		&clusterv3.Cluster{}, &aggregatev3.ClusterConfig{}, &routev3.ScopedRouteConfiguration{},
		&xdscorev3.ResourceLocator{}, &anypb.Any{},
	} {
		refTypes[m.ProtoReflect().Descriptor().FullName()] = true
	}
}

var leadCache sync.Map // protoreflect.FullName → []protoreflect.FieldDescriptor

// leads lists the message fields of md whose values can hold a message
// that makes references.
func leads(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if fs, ok := leadCache.Load(md.FullName()); ok {
		return fs.([]protoreflect.FieldDescriptor)
	}
	var out []protoreflect.FieldDescriptor
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fm := fieldMessage(fd); fm != nil && reaches(fm, map[protoreflect.FullName]bool{}) {
			out = append(out, fd)
		}
	}
	leadCache.Store(md.FullName(), out)
	return out
}

func fieldMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		return fd.MapValue().Message()
	}
	return fd.Message()
}

// reaches reports whether a value of type md can hold a message of
// refTypes.
func reaches(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md == nil || seen[md.FullName()] {
		return false
	}
	if refTypes[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		if reaches(fieldMessage(fs.Get(i)), seen) {
			return true
		}
	}
	return false
}
