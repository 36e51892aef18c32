// Package bolt is the embedded, durable store.Store, kept in one bbolt file.
// Every successful Apply is fsynced before it returns, so an acknowledged
// batch survives a crash, and a batch is one bbolt transaction, so none is
// ever half there. It must not import db, protocol, client or the roles.
package bolt
