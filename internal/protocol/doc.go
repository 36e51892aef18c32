// Package protocol is xdsd's downstream xDS wire engine: the SotW and delta
// state machines of each stream and type, ADS multiplexing, nonces, ACK and
// NACK tracking, and response encoding from pre-marshaled bytes. It serves
// what a db holds to whoever subscribes, so the server and the relay share
// it (docs/architecture.md §2). It must not import store, client or the roles.
//
// # Who owns what
//
// A Server owns what its streams share: the encodings of responses
// (bodyCache) and of variants (fragTable, a side table keyed weakly by
// variant: the wire format is this package's, not the resource model's),
// the memo of computations streams in step share, and the interned watch
// sets. Nothing is shared between Servers, and nothing is process-wide
// but values fixed at init.
//
// Each stream runs on two goroutines. The receiving goroutine (recvLoop)
// reads requests and applies them; it alone changes the stream's
// subscriptions, and it subscribes in the db with the stream's lock
// released (in a relay, db.Subscribe waits for the upstream interest hook),
// before the new subscriptions are applied, so no computation sees a
// subscription the db does not yet mark the stream for. As it ends it
// unsubscribes everything the stream held. The sending goroutine (run, the
// gRPC handler's) computes the responses due from the latest db state and
// sends them. The stream's lock guards its per-type state between the two
// and the admin views; it is never held while calling into the db except
// to read it.
package protocol
