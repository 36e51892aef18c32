// Package client is xdsd's upstream xDS layer and Go client library: the
// gRPC bootstrap (with TP2 dynamic parameters), one ADS stream per server
// (delta or SotW) with ACK/NACK, reconnection with backoff and fallback to
// the next server, federation by authority, collections, redirects, #alt=
// failover, on-demand VHDS, and a Watch API.
//
// Its cache is the same subscription db a server uses (docs/architecture.md §2): local
// watchers subscribe in the db, and the db's interest hooks drive the
// upstream subscriptions, so many watchers of a resource share one upstream
// subscription, and a relay is this package's db served by protocol.
//
// client must not import protocol, store or the roles.
package client
