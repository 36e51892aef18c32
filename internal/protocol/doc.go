// Package protocol is xdsd's downstream xDS wire engine: the SotW and delta
// state machines of each stream and type, ADS multiplexing, nonces, ACK and
// NACK tracking, and response encoding from pre-marshaled bytes. It serves
// what a db holds to whoever subscribes, so the server and the relay share
// it (docs/architecture.md §2). It must not import store, client or the roles.
package protocol
