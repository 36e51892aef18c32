// Package cachepolicy is how a cache of upstream xDS servers serves
// others: the rules that make xdsd's relay a relay (TP1 "xDS relay proxy",
// TP2 "caching proxies"). The relay makes one Policy and hands it to both
// layers it wires together — the upstream client that fills its cache, and
// the downstream protocol engine that serves it — so the rules live in one
// value the relay owns, not as flags scattered through the core. A plain
// client uses the zero Policy.
package cachepolicy

import (
	"time"

	"github.com/xdsd/xdsd/internal/db"
)

// Policy is a cache's rules for its upstream subscriptions and its
// downstream service.
type Policy struct {
	// Upstream, in the client.

	// Locators sends every upstream subscription as a TP2 resource
	// locator, even with no parameters: the downstream clients' parameters
	// (or node metadata), not the cache's own node, select variants
	// upstream.
	Locators bool
	// AnyAuthority routes names of authorities the bootstrap does not list
	// to its top-level servers instead of failing them: a relay with one
	// upstream serves every authority through it.
	AnyAuthority bool
	// NeverTimeOut: the cache says a resource does not exist only when its
	// upstream does. A resource merely slow to come (an upstream relay cut
	// off from its origin) must not be removed from every client below;
	// leaf clients keep their own timers.
	NeverTimeOut bool
	// Subscribed, when set, is told of every subscription to the cache and
	// whether it could be answered from it at once (hit/miss metrics).
	Subscribed func(s db.Sub, cached bool)
	// Linger keeps an upstream subscription, and its cache entry fresh,
	// this long after the last subscriber of its (type, name, parameters)
	// has left: short-lived clients (jobs, CLIs) then find a warm cache,
	// and one arriving while the upstream is down is still served. Zero:
	// the upstream subscription ends with the last subscriber.
	Linger time.Duration
	// Lingering, when set, is told how many upstream subscriptions linger
	// with no subscriber, as that changes, and whether a subscriber took
	// one up again (revived). It runs on the client's state goroutine.
	Lingering func(count int, revived bool)

	// Downstream, in the protocol engine.

	// HonorDoNotCache: a variant marked cache_control.do_not_cache is not
	// sent to a subscription older than the variant; it waits for the
	// fresh copy its subscription causes upstream (xDS: proxies may not
	// cache such resources).
	HonorDoNotCache bool
	// PendingWait bounds how long a SotW full state (LDS, CDS) waits for
	// names the upstream has not answered yet and the client never had;
	// then it goes without them (a SotW upstream cannot say a resource does
	// not exist, and the rest must not wait forever). Zero: 5s.
	PendingWait time.Duration
}
