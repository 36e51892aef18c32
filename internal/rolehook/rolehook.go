// Package rolehook lets cmd/xdsd reach what a public role keeps out of
// its API because it is made of internal types: the role's package sets
// the hooks in its init, and cmd/xdsd calls them. Go users get the same
// information through the role's public API, in public types.
package rolehook

import "github.com/xdsd/xdsd/internal/protocol"

// RelayClients reports a *relay.Relay's downstream streams as the admin
// API shows them (set by package relay).
var RelayClients func(relay any) []protocol.Client

// RelayProtocol returns a *relay.Relay's downstream engine, which holds
// the fleet index of the clients behind the relay (set by package relay).
var RelayProtocol func(relay any) *protocol.Server

// RelayGuard returns a relay.Options with the downstream access policy
// (xdsd relay --policy) set (set by package relay).
var RelayGuard func(options any, g protocol.Guard) any
