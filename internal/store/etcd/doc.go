// Package etcd is a store.Store kept in etcd, so that several xdsd serve
// replicas share one authoritative state and send the same versions for
// it.
//
// # Layout
//
// Under a key prefix (default "/xdsd/"):
//
//	head                the committed state's head: xdsd revision, last batch
//	r/TYPE\0NAME\0CONS  one variant (store.EncodeRecord, version included)
//	m/KEY               one metadata value
//	s/ID/m              a batch being prewritten: its marker, bound to a lease
//	s/ID/c/NNNNNNNN     a prewritten batch's content, in chunks under 1 MiB
//	hr/REV              a revision's record (when, who), 16 digits
//	hu/REV/RESKEY       one change of that revision: created, updated or
//	                    deleted, with the variant it replaced (undo data)
//
// History (Revisions, StateAt) is written with the batch it records, so
// it is the same on every replica and survives restarts; the commit that
// makes a revision deletes the records older than History revisions.
//
// # Revisions and versions
//
// The xdsd revision is a counter in head, raised by one by each committed
// batch that changes a resource; a variant's version (store.Version) is
// computed by the replica that plans the batch and stored in the record.
// Every replica reads both from etcd, never from a local counter, so all
// of them send the same version_info and per-resource versions for the
// same committed state, and a client may move between them.
//
// # Atomic batches of any size
//
// etcd refuses a request over 1.5 MiB and a transaction over 128
// operations, so a large batch cannot be one transaction. Readers follow
// only head: a batch is committed by the one small transaction that
// replaces head, and is visible from that etcd revision on, whole.
//
//   - A batch small enough for one transaction (at most 120 changed keys,
//     under 512 KiB) is committed with its content: head, holding the plan
//     (what replicas following head apply), and the r/ and m/ keys, in one
//     transaction guarded by a compare on head's mod revision.
//   - A larger batch is prewritten first: a marker s/ID/m bound to a lease the
//     writer keeps alive, then the plan in chunks s/ID/c/N, each written
//     only if the marker is still there. The commit is one transaction:
//     if head's mod revision is the one planned against and the marker is
//     the writer's, head names batch ID as pending. From then on a reader
//     sees the state as r/ and m/ overlaid with the pending batch's chunks,
//     so the batch is wholly visible at once. Then the batch is copied into
//     r/ and m/ in transactions of at most 120 operations, each guarded by
//     a compare on head's mod revision (a copy that lost the race to a later
//     batch writes nothing), and a last transaction marks head applied and
//     deletes the chunks.
//
// Replicas follow head with an etcd watch; each head change is applied to
// the replica's in-memory copy from the plan it carries or names (read at
// the head's etcd revision). A watch that was compacted (ErrCompacted), or
// that skipped a head version, reloads the whole state at one etcd
// revision and turns the difference into one change set: connected
// clients are neither dropped nor reset.
//
// # Concurrent writers
//
// Every commit compares head's mod revision with the one its plan was made
// against, so two replicas applying at once serialize: the loser's commit
// fails, and it plans again against the new state and retries (a batch
// replaces the variants it names, so the retry means what the batch meant).
// After MaxAttempts lost races the apply fails with ErrContended; nothing
// is merged and no write is lost. A writer that finds a batch pending
// (its writer died after the commit) first finishes copying it.
//
// # Failures
//
//   - Writer killed before its commit: the batch was never visible. Its
//     marker vanishes when its lease expires (LeaseTTL), and the next large
//     apply, or Open, deletes prewritten chunks whose marker is gone and that
//     head does not name — a chunk is only ever written while its marker
//     exists, so a deleted prewrite area cannot grow back.
//   - Writer killed after its commit: the batch is committed and visible
//     (readers overlay its chunks); the next writer, on any replica, copies
//     it into r/ before planning its own.
//   - etcd unreachable: replicas keep serving the state they hold; Apply
//     fails within RequestTimeout saying etcd is unreachable; Unreachable
//     reports it for /readyz; the watch resumes, or reloads, when etcd
//     returns.
//   - A record under r/ edited behind xdsd's back, so that it no longer
//     decodes: Open fails naming the key and the repair; a running
//     replica keeps serving what it loaded, and Damaged reports it for
//     /readyz once Check or a reload reads it (a reload that meets it is
//     retried after 5 s, not at once). Open with Repair leaves such
//     records out, and its next commit replaces or deletes them (xdsd
//     restore).
package etcd
