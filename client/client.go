package client

import (
	"context"

	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/clientcore"
)

// Client is an xDS client: it subscribes to resources of any type from the
// servers of their authorities and caches them.
type Client struct {
	c *clientcore.Client
}

// New starts a client. Close it when done.
func New(b *Bootstrap, o Options) (*Client, error) {
	c, err := clientcore.New(b, o, cachepolicy.Policy{})
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Handler receives a watcher's events. Handlers are called one at a time, in
// order, on the client's handler goroutine; they must not block for long.
// A handler may start and cancel watches, and may Close the client.
type Handler func(Event)

// CancelFunc ends a watch, as the end of its context does. It never
// blocks: it returns a channel that is closed once the watch's handler
// will not be called again — at once if no call is under way, else when
// that call returns. A handler may cancel its own watch or another, but
// must not wait on the channel (it would wait for itself). Calling it
// again returns the same channel.
type CancelFunc func() <-chan struct{}

// Watch subscribes to a resource of any type and calls h with every change.
// name may be a legacy name, an xdstp:// URN, a glob collection URL
// (".../*", delta only), "*" (every resource of the type), a VHDS
// "<route config>/<host>", and may carry #alt= (fetched while the name's
// authority is unreachable) and, on a list collection, #entry= (deliver that
// inline entry). A watcher is told the cached value at once if there is
// one.
//
// cancel, or the end of ctx, stops the watch; the last watcher of a
// resource unsubscribes it upstream. cancel never waits for a handler:
// the channel it returns is closed once h will not be called again.
//
// A name from configuration may not carry xds.* context parameters: TP1
// reserves them for attributes the client computes, which WatchComputed
// adds.
func (c *Client) Watch(ctx context.Context, typeURL, n string, h Handler) (cancel CancelFunc, err error) {
	return c.c.Watch(ctx, typeURL, n, h)
}

// WatchComputed is Watch of an xdstp:// name with computed attributes
// added to its context parameters as xds.resource.KEY=VALUE (TP1 "Context
// parameters"): an on-demand listener found by the VIP a request was sent
// to, say, is watched as NAME with {"vip": "96.54.3.1"}. The server
// matches them like any context parameter: it serves the resource
// authored under the name with those parameters.
func (c *Client) WatchComputed(ctx context.Context, typeURL, n string, attrs map[string]string, h Handler) (cancel CancelFunc, err error) {
	return c.c.WatchComputed(ctx, typeURL, n, attrs, h)
}

// WatchCollection watches a TP1 list collection and calls h with its whole
// membership whenever it or any member changes: inline entries are taken as
// they are, locator entries are watched. Members not (yet) fetched are
// left out; errors go to onErr when it is set. cancel, or the end of ctx,
// stops it, as for Watch: the channel it returns is closed once neither h
// nor onErr will be called again.
func (c *Client) WatchCollection(ctx context.Context, typeURL, collection string, h func([]CollectionMember), onErr func(error)) (cancel CancelFunc, err error) {
	return c.c.WatchCollection(ctx, typeURL, collection, h, onErr)
}

// Close stops every stream, timer and watcher: once it returns, no handler
// call starts. It does not wait for a handler call under way — Close may
// be called from a handler — but for nothing else: wait on a watch's
// CancelFunc channel to know its handler has returned. A Close racing
// another waits for it.
func (c *Client) Close() { c.c.Close() }

// Stats reports the client's counters (zero once it is closed).
func (c *Client) Stats() Stats { return c.c.Stats() }

// Upstreams reports each upstream stream: its servers, which one it is
// connected to, and its subscriptions and counters (none once the client
// is closed).
func (c *Client) Upstreams() []Upstream { return c.c.Upstreams() }

// UpstreamFor reports the upstream stream serving a resource name: so a
// caller waiting for the name can tell a server that was never reached
// from a resource that does not exist.
func (c *Client) UpstreamFor(n string) (Upstream, error) { return c.c.UpstreamFor(n) }
