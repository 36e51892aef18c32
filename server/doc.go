// Package server embeds an xDS management server in a Go program: the
// program builds resources from its own source of truth (a service
// registry, Kubernetes objects, a database) and the server serves them to
// every xDS client — Envoy, gRPC, the client package — over SotW and
// delta, ADS or per type, with TP1 xdstp:// names and TP2 variants.
//
// # Building a server
//
// New(ctx, options) makes a server from Options and returns once it
// holds the store's state (ctx bounds that wait only). Its Store is where
// the resources live: MemoryStore (the default) for a program that
// rebuilds its configuration at start, OpenBolt for one whose clients
// should see the same versions after a restart. Serve serves on a listener; Register adds the xDS
// services to the program's own *grpc.Server, created with
// GRPCServerOptions and the server's TransportCredentials (which bound
// the requests one connection may have the server hold while it reads
// them, Options.MaxConnectionRequestBytes).
//
// # Changing what is served
//
// A program pushes with Apply, or is pulled from with Follow:
//
//   - Apply(ctx, batch) applies one Batch atomically, with the checks and
//     versions `xdsd apply` has: every variant it changes gets the new
//     revision as its version, a batch that breaks TP2's rules is rejected
//     whole, and one that changes nothing makes no revision. Batch.Put
//     builds the batch from protobuf messages: several Puts of one name
//     with different constraint.Constraints are one resource's TP2
//     variants.
//   - Follow(ctx, source, trigger) calls a Source's Resources at once and on
//     every trigger, and applies the difference, deleting what the source
//     stopped defining.
//
// Clients reports the connected streams: per type, what each ACKed or
// NACKed and which variant of each resource it holds.
//
// # How it fits the other packages
//
// Resources are resource.Variant values (package resource), their TP2
// selectors constraint.Constraints (package constraint), their names
// checked by package name. Package relay serves a cache of an upstream
// server the same way; package client reads from either. What a server
// does inside (the store, the subscription database, the protocol engine)
// is internal and described in docs/architecture.md; cmd/xdsd is the same
// server, driven by YAML files and an HTTP admin API instead of Go code.
package server
