// Package store is xdsd's authoritative resource store: atomic batches that
// produce a revision, a change feed resumable from any revision, and reads
// of the whole state. A revision is the single clock of the system: a
// variant's version is the revision that last changed it (docs/architecture.md §4.3).
// A batch may also carry metadata, unversioned key/value pairs written in
// the same transaction, by which a writer records what its batches did (a
// watched directory's resources) so that the record survives restarts and
// never disagrees with the store.
//
// Backends: store/bolt (embedded, the default), store/etcd (shared by
// replicas) and store/mem (tests). The package must not import db,
// protocol, client or the roles.
package store
