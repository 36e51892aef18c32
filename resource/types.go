package resource

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TypePrefix is the prefix of every type URL xDS uses.
const TypePrefix = "type.googleapis.com/"

// Type describes one xDS resource type. Types are data, not an enum: what
// varies per type (its message, its name field, whether SotW responses must
// carry the full state) lives here, so the protocol code never switches on a
// type.
type Type struct {
	// URL is the type URL, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster.
	URL string
	// Name is the full protobuf message name, e.g. envoy.config.cluster.v3.Cluster.
	Name string
	// Aliases are short names accepted on the command line (lowercase).
	Aliases []string
	// NameField is the payload field that carries the resource's own name
	// ("name", "cluster_name"), or "" if the message has none.
	NameField string
	// FullState is true for LDS and CDS: a SotW response must hold every
	// subscribed resource, and a resource missing from it is deleted
	// (docs/protocol.md §1.7).
	FullState bool
	// Order places the type in ADS make-before-break order (docs/protocol.md
	// §1.9): clusters, endpoints, listeners, routes, virtual hosts, then the
	// rest. Lower goes first.
	Order int
	// Element is, for a list collection type (TP1 <T>Collection), the type of
	// its members; nil otherwise.
	Element *Type
	// Known is false for a type xdsd has no message for. Caches (client,
	// relay) carry such resources opaquely; the server refuses to author them.
	Known bool

	msg protoreflect.MessageType
}

// New returns a new empty message of the type; nil for unknown types.
func (t *Type) New() proto.Message {
	if t.msg == nil {
		return nil
	}
	return t.msg.New().Interface()
}

// MessageType is the protobuf type of the payload, or nil for unknown types.
func (t *Type) MessageType() protoreflect.MessageType { return t.msg }

// String returns the full message name.
func (t *Type) String() string { return t.Name }

// NameOf returns the name held in a payload message of this type, or "" when
// the type has no name field.
func (t *Type) NameOf(m proto.Message) string {
	if t.NameField == "" || m == nil {
		return ""
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(protoreflect.Name(t.NameField))
	if fd == nil {
		return ""
	}
	return r.Get(fd).String()
}

// SetNameOf sets the name field of a payload message of this type. It does
// nothing when the type has no name field.
func (t *Type) SetNameOf(m proto.Message, n string) {
	if t.NameField == "" || m == nil {
		return
	}
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName(protoreflect.Name(t.NameField))
	if fd == nil {
		return
	}
	r.Set(fd, protoreflect.ValueOfString(n))
}

// The well-known type URLs.
const (
	ListenerURL           = TypePrefix + "envoy.config.listener.v3.Listener"
	RouteURL              = TypePrefix + "envoy.config.route.v3.RouteConfiguration"
	ScopedRouteURL        = TypePrefix + "envoy.config.route.v3.ScopedRouteConfiguration"
	VirtualHostURL        = TypePrefix + "envoy.config.route.v3.VirtualHost"
	ClusterURL            = TypePrefix + "envoy.config.cluster.v3.Cluster"
	EndpointURL           = TypePrefix + "envoy.config.endpoint.v3.ClusterLoadAssignment"
	LbEndpointURL         = TypePrefix + "envoy.config.endpoint.v3.LbEndpoint"
	SecretURL             = TypePrefix + "envoy.extensions.transport_sockets.tls.v3.Secret"
	RuntimeURL            = TypePrefix + "envoy.service.runtime.v3.Runtime"
	ExtensionConfigURL    = TypePrefix + "envoy.config.core.v3.TypedExtensionConfig"
	ListenerCollectionURL = TypePrefix + "envoy.config.listener.v3.ListenerCollection"
	ClusterCollectionURL  = TypePrefix + "envoy.config.cluster.v3.ClusterCollection"
	LbEndpointCollURL     = TypePrefix + "envoy.config.endpoint.v3.LbEndpointCollection"
	LocatorURL            = TypePrefix + "xds.core.v3.ResourceLocator"
	// WrapperURL is the type URL of envoy.service.discovery.v3.Resource, the
	// wrapper a SotW response may carry (docs/protocol.md §1.10).
	WrapperURL = TypePrefix + "envoy.service.discovery.v3.Resource"
)

// registry holds the registered types. It is filled by Register, from init
// functions, and read-only afterwards; types xdsd does not know are not
// remembered in it (ForURL), so nothing a peer sends changes it, and the
// servers and clients of one process share nothing that changes.
var registry = struct {
	sync.RWMutex
	byKey   map[string]*Type // URL, message name and aliases, lowercased aliases
	ordered []*Type
}{byKey: map[string]*Type{}}

func init() {
	listener := &Type{Aliases: []string{"lds", "listener", "listeners"}, NameField: "name", FullState: true, Order: 30}
	route := &Type{Aliases: []string{"rds", "route", "routes", "routeconfiguration"}, NameField: "name", Order: 40}
	cluster := &Type{Aliases: []string{"cds", "cluster", "clusters"}, NameField: "name", FullState: true, Order: 10}
	lbEndpoint := &Type{Aliases: []string{"leds", "lbendpoint", "lbendpoints"}, Order: 25}
	for _, t := range []struct {
		t *Type
		m proto.Message
	}{
		{listener, &listenerv3.Listener{}},
		{route, &routev3.RouteConfiguration{}},
		{&Type{Aliases: []string{"srds", "scopedroute", "scopedroutes", "scopedrouteconfiguration"}, NameField: "name", Order: 45}, &routev3.ScopedRouteConfiguration{}},
		{&Type{Aliases: []string{"vhds", "virtualhost", "virtualhosts", "vhost"}, NameField: "name", Order: 50}, &routev3.VirtualHost{}},
		{cluster, &clusterv3.Cluster{}},
		{&Type{Aliases: []string{"eds", "endpoint", "endpoints", "cla", "clusterloadassignment"}, NameField: "cluster_name", Order: 20}, &endpointv3.ClusterLoadAssignment{}},
		{lbEndpoint, &endpointv3.LbEndpoint{}},
		{&Type{Aliases: []string{"sds", "secret", "secrets"}, NameField: "name", Order: 60}, &tlsv3.Secret{}},
		{&Type{Aliases: []string{"rtds", "runtime"}, NameField: "name", Order: 70}, &runtimev3.Runtime{}},
		{&Type{Aliases: []string{"ecds", "extension", "extensionconfig", "typedextensionconfig"}, NameField: "name", Order: 80}, &corev3.TypedExtensionConfig{}},
		{&Type{Aliases: []string{"listenercollection"}, Element: listener, Order: 31}, &listenerv3.ListenerCollection{}},
		{&Type{Aliases: []string{"clustercollection"}, Element: cluster, Order: 11}, &clusterv3.ClusterCollection{}},
		{&Type{Aliases: []string{"lbendpointcollection"}, Element: lbEndpoint, Order: 26}, &endpointv3.LbEndpointCollection{}},
		{&Type{Aliases: []string{"locator", "redirect", "resourcelocator"}, Order: 90}, &xdscorev3.ResourceLocator{}},
	} {
		// Not Register: its check of the name field reads the message's
		// fields, which builds the whole descriptor of its file — about
		// 1 ms of every xdsd command's start for these types, a
		// one-cluster `xdsd apply` that never reads them included.
		// TestBuiltinNameFields checks these instead.
		register(t.t, t.m)
	}
}

// Register adds a type to the registry, filling URL, Name and Known from the
// message. Call it from an init function: it panics on a conflicting name,
// and the registry is meant to be fixed once the program runs.
func Register(t *Type, m proto.Message) {
	if t.NameField != "" && m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(t.NameField)) == nil {
		panic(fmt.Sprintf("resource: %s has no field %q", m.ProtoReflect().Descriptor().FullName(), t.NameField))
	}
	register(t, m)
}

// register is Register without the check of the name field.
func register(t *Type, m proto.Message) {
	mt := m.ProtoReflect().Type()
	t.msg = mt
	t.Name = string(mt.Descriptor().FullName())
	t.URL = TypePrefix + t.Name
	t.Known = true
	registry.Lock()
	defer registry.Unlock()
	for _, k := range append([]string{t.URL, t.Name, strings.ToLower(t.Name)}, t.Aliases...) {
		if old, ok := registry.byKey[k]; ok && old != t {
			panic(fmt.Sprintf("resource: %q registered twice", k))
		}
		registry.byKey[k] = t
	}
	registry.ordered = append(registry.ordered, t)
	sort.SliceStable(registry.ordered, func(i, j int) bool { return registry.ordered[i].Order < registry.ordered[j].Order })
}

// Lookup finds a registered type by type URL, full message name or alias
// (aliases are case-insensitive). It never returns an unknown type.
func Lookup(s string) (*Type, error) {
	registry.RLock()
	t, ok := registry.byKey[s]
	if !ok {
		t, ok = registry.byKey[strings.ToLower(s)]
	}
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown resource type %q (want a type URL, a message name such as envoy.config.cluster.v3.Cluster, or an alias: %s)", s, strings.Join(aliasList(), ", "))
	}
	return t, nil
}

// ForURL returns the type for a type URL as it arrives on the wire. A URL
// xdsd does not know gives an opaque type (Known false), described afresh
// on each call, so caches can still carry it; compare types by URL.
func ForURL(url string) *Type {
	registry.RLock()
	t, ok := registry.byKey[url]
	registry.RUnlock()
	if ok {
		return t
	}
	name := strings.TrimPrefix(url, TypePrefix)
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		name = url[i+1:]
	}
	t = &Type{URL: url, Name: name, Order: 1000}
	// A type xdsd does not know may still be a message linked into the
	// binary (an extension type, say); decode it when we can.
	if mt, err := protoregistry.GlobalTypes.FindMessageByURL(url); err == nil {
		t.msg = mt
	}
	return t
}

// Types lists the registered types in ADS order.
func Types() []*Type {
	registry.RLock()
	defer registry.RUnlock()
	return append([]*Type(nil), registry.ordered...)
}

func aliasList() []string {
	registry.RLock()
	defer registry.RUnlock()
	var out []string
	for _, t := range registry.ordered {
		if len(t.Aliases) > 0 {
			out = append(out, t.Aliases[0])
		}
	}
	return out
}
