// Package mem is an in-memory store.Store, for tests and for throwaway
// servers (xdsd serve --store mem:). Nothing survives the process. It must
// not import db, protocol, client or the roles.
package mem
