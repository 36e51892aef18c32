// Package origin is the server role's engine: the authoritative store
// feeds the subscription db, and protocol serves the db to downstream xDS
// streams (docs/architecture.md §2). cmd/xdsd and the in-module tests use
// it directly; package server wraps it in the public embedding API. It
// must not import relay.
package origin
