// Package name owns xDS resource names: xdstp:// URNs and URLs (xRFC TP1)
// and legacy opaque names.
//
// It parses names, prints their canonical string, compares them by
// component rather than by raw text, reads and merges context parameters,
// recognises globs and derives the glob collection a name belongs to,
// handles the alt= and entry= directives, and applies Envoy's
// percent-encoding rules, so that a name printed here is byte-for-byte
// the name Envoy would print (save an id ending in an escaped "%2A", which
// is not a glob here and stays escaped; see Name.String). It also converts to and from the
// xds.core.v3 ResourceLocator and ResourceName protos.
//
// Every other package that needs to look inside a resource name goes
// through this one, so the rules live in one place. To keep it a leaf that
// anything can depend on, it must not import any other package of this
// module; it imports only the standard library and
// github.com/cncf/xds/go/xds/core/v3.
package name
