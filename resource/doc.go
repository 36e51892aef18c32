// Package resource is xdsd's resource model: the registry of xDS resource
// types (type URL ↔ Go message type, short aliases such as "cds"), the
// Variant (one stored or cached variant of a named resource, marshaled once),
// the YAML/JSON authoring format of docs/architecture.md §4.2, and resource validation.
//
// It sits above name and constraint and below everything else: it must not
// import db, store, protocol, client, server, relay, admin or cmd.
package resource
