package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server"
)

// Service is one service file.
type Service struct {
	Name      string   `yaml:"name"`
	Port      uint32   `yaml:"port"`
	Endpoints []string `yaml:"endpoints"` // addresses (IPs or host names)
}

// Registry is a directory of service files. It is a server.Source: the
// server calls Resources to learn the whole state.
type Registry struct{ Dir string }

// Resources reads every *.service file (YAML) of the directory and returns the xDS
// resources of its services. A file that cannot be read or parsed fails
// the whole read, so a half-written file never removes a service.
func (r Registry) Resources(context.Context) ([]*resource.Variant, error) {
	files, err := filepath.Glob(filepath.Join(r.Dir, "*.service"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var b server.Batch
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var s Service
		if err := yaml.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := s.put(&b); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return b.Puts, nil
}

// put adds the service's listener, route configuration, cluster and
// endpoints, all named after it: what a gRPC client dialing
// xds:///<name> asks for.
func (s Service) put(b *server.Batch) error {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: s.Name,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: s.Name, ConfigSource: ads}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		return err
	}
	var lbs []*endpointv3.LbEndpoint
	for _, e := range s.Endpoints {
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: e, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: s.Port}}}}}}})
	}
	for _, put := range []func() error{
		func() error {
			return b.Put(s.Name, &listenerv3.Listener{ApiListener: &listenerv3.ApiListener{ApiListener: hcm}})
		},
		func() error {
			return b.Put(s.Name, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
				Name: s.Name, Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: ""}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: s.Name}}},
				}},
			}}})
		},
		func() error {
			return b.Put(s.Name, &clusterv3.Cluster{
				ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
				EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads},
			})
		},
		func() error {
			return b.Put(s.Name, &endpointv3.ClusterLoadAssignment{Endpoints: []*endpointv3.LocalityLbEndpoints{{
				// gRPC ignores a locality without a weight.
				Locality: &corev3.Locality{}, LoadBalancingWeight: wrapperspb.UInt32(1), LbEndpoints: lbs,
			}}})
		},
	} {
		if err := put(); err != nil {
			return err
		}
	}
	return nil
}
