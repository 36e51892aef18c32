// Package origin is the server role, assembled in one place: the
// authoritative store feeds the subscription db, and protocol serves the
// db to downstream xDS streams (docs/architecture.md §2). New builds it,
// Register puts its services on a gRPC server, Start follows the store,
// WaitRev waits for a revision to be served (and fails once the store is
// no longer followed), Close ends it. Package server wraps it in the
// public embedding API, and `xdsd serve` (cmd/xdsd) drives it from files
// and the admin API; neither builds the role itself. The --watch
// directory watcher is here too. It must not import relay.
package origin
