// Package inspect is the engine of xdsd get and watch: it runs an xDS
// client with the parameters an operator gives (a server or a bootstrap,
// TP2 dynamic parameters, computed attributes) and reports what such a
// client receives — each name once in its latest state (Get), every change
// (Watch), or the whole chain of references a client resolves from the
// names (Follow, WatchChain).
//
// It holds the waiting and the bookkeeping (which names have been
// answered, when a glob has settled, when a server is known to be
// unreachable), not the command line: cmd/xdsd parses flags into a Config
// and prints what the engine returns.
package inspect
