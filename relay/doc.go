// Package relay puts a caching xDS proxy (TP1 "xDS relay proxy", TP2
// "caching proxies") in front of any xDS server: a program makes one with
// New from a client.Bootstrap naming the upstream servers (an address, or
// several authorities), registers it on its own gRPC server (created with
// server.GRPCServerOptions) and points its clients at it. The relay holds
// one upstream subscription per resource however many clients ask, serves
// from its cache while the upstream is down, and carries TP2 variants and
// TP1 names through unchanged. `xdsd relay` is the same relay as a binary.
//
// Inside, downstream streams are served by the protocol engine from the
// db that the client fills from upstream streams (docs/architecture.md
// §2). One upstream subscription per distinct (type, name, dynamic
// parameters), however many downstream streams ask; variants are cached
// with their constraints and sent downstream with them; the cache keeps
// serving while the upstream is unreachable. The engine is
// internal/relayrole, which xdsd relay uses directly; this package is its
// face for Go programs.
package relay
