package client

import (
	"context"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// TypedEvent is an Event with its resource decoded.
type TypedEvent[M proto.Message] struct {
	Event
	// Resource is the decoded resource (Updated; Errored when a last good
	// value exists), or the zero value.
	Resource M
}

// WatchTyped watches a resource whose type is given by the message type M
// (which must be a registered xDS resource type, e.g. *clusterv3.Cluster).
// A resource that cannot be decoded as M is reported as Errored. cancel,
// or the end of ctx, stops it, as for Client.Watch.
func WatchTyped[M proto.Message](ctx context.Context, c *Client, n string, h func(TypedEvent[M])) (cancel CancelFunc, err error) {
	var zero M
	t, err := resource.Lookup(string(zero.ProtoReflect().Descriptor().FullName()))
	if err != nil {
		return nil, err
	}
	return c.Watch(ctx, t.URL, n, func(e Event) {
		te := TypedEvent[M]{Event: e}
		if e.Variant != nil && !e.Variant.IsRedirect() {
			m, err := e.Variant.Message()
			typed, ok := m.(M)
			switch {
			case err != nil:
				te.Kind, te.Err = Errored, err
			case !ok:
				te.Kind, te.Err = Errored, fmt.Errorf("%s is a %T", e.Variant.Name, m)
			default:
				te.Resource = typed
			}
		}
		h(te)
	})
}

// WatchListener watches a Listener (LDS).
func (c *Client) WatchListener(ctx context.Context, n string, h func(TypedEvent[*listenerv3.Listener])) (CancelFunc, error) {
	return WatchTyped(ctx, c, n, h)
}

// WatchRouteConfig watches a RouteConfiguration (RDS).
func (c *Client) WatchRouteConfig(ctx context.Context, n string, h func(TypedEvent[*routev3.RouteConfiguration])) (CancelFunc, error) {
	return WatchTyped(ctx, c, n, h)
}

// WatchCluster watches a Cluster (CDS).
func (c *Client) WatchCluster(ctx context.Context, n string, h func(TypedEvent[*clusterv3.Cluster])) (CancelFunc, error) {
	return WatchTyped(ctx, c, n, h)
}

// WatchEndpoints watches a ClusterLoadAssignment (EDS).
func (c *Client) WatchEndpoints(ctx context.Context, n string, h func(TypedEvent[*endpointv3.ClusterLoadAssignment])) (CancelFunc, error) {
	return WatchTyped(ctx, c, n, h)
}

// WatchSecret watches a Secret (SDS).
func (c *Client) WatchSecret(ctx context.Context, n string, h func(TypedEvent[*tlsv3.Secret])) (CancelFunc, error) {
	return WatchTyped(ctx, c, n, h)
}

// VirtualHost watches the virtual host that serves host in a route
// configuration, by on-demand VHDS (delta): the server resolves
// "<routeConfig>/<host>" by domain; DoesNotExist when none matches.
func (c *Client) VirtualHost(ctx context.Context, routeConfig, host string, h func(TypedEvent[*routev3.VirtualHost])) (CancelFunc, error) {
	return WatchTyped(ctx, c, routeConfig+"/"+host, h)
}
