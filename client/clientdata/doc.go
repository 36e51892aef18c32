// Package clientdata holds the data types of package client: what
// configures a client (its bootstrap and Options) and what it reports
// (events, collection members, upstream streams, counters).
//
// Programs use them through package client, which names each of them;
// they live here, below the client's engine (internal/clientcore), so that
// the engine and its users — package client, and the relay, which runs the
// engine under its cache policy — share these types instead of converting
// between copies of them (docs/architecture.md §3).
package clientdata
