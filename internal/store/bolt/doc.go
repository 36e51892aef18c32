// Package bolt is the embedded, durable store.Store, kept in one bbolt file.
// Every successful Apply is fsynced before it returns, so an acknowledged
// batch survives a crash, and a batch becomes visible in one bbolt
// transaction, so none is ever half there (a large batch writes its
// payloads first, under keys nothing refers to until that transaction; see
// Apply). The file's layout is versioned (format): older layouts are read
// and upgraded on open, newer ones refused. It must not import db,
// protocol, client or the roles.
//
// Its files, one job each: bolt.go (Store, its buckets, Open and Close),
// check.go (what Open checks of a file), format.go (the layout version and
// upgrades), record.go (variant records and bodies), keylist.go (the key
// lists of log entries and revision records), apply.go (Apply),
// prewrite.go (bodies written ahead of a commit), history.go (undo
// records, Revisions, StateAt), revision.go (the revision record codec),
// changes.go (Changes), backup.go (Backup, Verify).
package bolt
