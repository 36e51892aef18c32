// Package db is the subscription database at the heart of every xdsd role
// (docs/architecture.md §2, TP2 "xDS Client and Server Architecture"): resources keyed
// by (type, name), each with its TP2 variants, and the subscribers of each,
// each subscription carrying dynamic parameters.
//
// A subscription is a Sub (sub.go): type, canonical name, parameters, kind
// and whether it came by TP2 locator, made once by NewSub and used as it
// is by the db, the protocol engine and the client; its Key is the one map
// key for subscriptions everywhere.
//
// A server feeds it from the store, a client and a relay from upstream
// streams; subscriptions come from downstream streams (protocol) or local
// watchers (client). So nothing here assumes a role: contents arrive by
// Update, interest in contents leaves by Hooks.
//
// Fan-out follows docs/architecture.md §5: an update marks the affected subscribers'
// pending sets and signals each once; nothing is queued and nothing blocks,
// and each subscriber reads the latest state when it is ready, so a slow one
// skips intermediate states instead of holding anyone back.
//
// db must not import protocol, client, the roles, or gRPC.
package db
