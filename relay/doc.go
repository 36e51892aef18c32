// Package relay is the xdsd relay role, a caching xDS proxy (TP1 "xDS
// relay proxy", TP2 "caching proxies"): downstream streams are served by
// protocol from the db that client fills from upstream streams (docs/architecture.md
// §2). One upstream subscription per distinct (type, name, dynamic
// parameters), however many downstream streams ask; variants are cached
// with their constraints and sent downstream with them; the cache keeps
// serving while the upstream is unreachable. It is wiring only; it must
// not import server.
package relay
