// Package storetest is the conformance suite every store.Store backend
// passes, so that all backends mean the same by a batch, a revision and a
// change feed. Only tests import it; it must not import db, protocol or the
// roles.
package storetest
