// Package clientcore is the engine of the xDS client: package client is
// its public face, and the relay (internal/relayrole) runs it to fill its
// cache.
//
// Its cache is the same subscription db a server uses (docs/architecture.md
// §2): local watchers subscribe in the db, and the db's interest hooks
// drive the upstream subscriptions, so many watchers of a resource share
// one upstream subscription, and a relay is this package's db served by
// the protocol engine.
//
// # Layers
//
// The package is three layers, each in its own files:
//
//   - The upstream stream (transport.go, session.go, requests.go): one ADS
//     stream at a time to one server of a list, behind a small transport
//     interface; backoff, fallback and return to the first server; the
//     requests due (SotW and delta, ACK and NACK, fetching again).
//   - The cache of held variants (channel.go, held.go, decode.go,
//     interest.go, status.go): what each channel holds and how responses
//     change it — full-state deletion, TP2 supersede, TTLs, what lingers
//     through an outage — written to the db, with each resource's status
//     (not found, rejected, its VHDS alias).
//   - The watch API (watch.go, deliver.go, collection.go; package client's
//     typed.go decodes for typed watches): watchers read the db and the
//     statuses and call their handlers.
//
// # Who owns what
//
// Two goroutines own the state, each running callbacks one at a time (a
// serializer, as in grpc-go's xDS client); there is no lock besides the
// serializers' queues and the db's own.
//
// The state goroutine owns the channels and everything in them, the
// statuses and their does-not-exist timers, and what lingers. The db's
// interest hooks run their work on it and wait (so an ended interest is
// evicted before a new subscription can read it); a session's goroutines
// build their requests and apply their responses through it; timers
// schedule onto it. It runs no user code, and never waits for the handler
// goroutine: statuses reach watchers through a published copy, and wakes
// through the handler goroutine's queue.
//
// The handler goroutine owns the watchers: their subscriptions in the db
// (after the first, which Watch makes before it returns), what each was
// last told, #alt= choices and timers. It calls the handlers, one at a
// time and in order.
//
// Each channel runs a goroutine that keeps a stream up and one that
// receives on it; the receiving goroutine runs the first pass of checks on
// a response, Options.Validate among them, before the state goroutine
// applies it.
//
// A watch's cancel never blocks: it marks the watch cancelled (no handler
// call starts after) and hands the rest to the handler goroutine; the
// channel it returns is closed once no handler call of the watch can
// happen. Close stops everything and waits for it, except a handler call
// under way, which may be Close's own caller.
//
// clientcore must not import protocol, store or the roles. Package client
// is its public face: it forwards each call and starts the engine under
// the zero cache policy. The relay's engine (internal/relayrole) starts it
// under the relay's policy (internal/cachepolicy) and serves its db (DB).
// Both share the data types of client/clientdata, which the engine builds
// and reads, so nothing is converted between the two (docs/architecture.md
// §3).
package clientcore
