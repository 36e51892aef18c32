// Package bolt is the embedded, durable store.Store, kept in one bbolt file.
// Every successful Apply is fsynced before it returns, so an acknowledged
// batch survives a crash, and a batch becomes visible in one bbolt
// transaction, so none is ever half there (a large batch writes its
// payloads first, under keys nothing refers to until that transaction; see
// Apply). The file's layout is versioned (format): older layouts are read
// and upgraded on open, newer ones refused. It must not import db,
// protocol, client or the roles.
package bolt
