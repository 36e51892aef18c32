// Package server is the xdsd server role: the authoritative store feeds the
// subscription db, and protocol serves the db to downstream xDS streams
// (docs/architecture.md §2). It is wiring only; it must not import relay.
package server
