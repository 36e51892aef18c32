// Package constraint owns TP2 dynamic parameters and dynamic parameter
// constraints (xRFC TP2, github.com/cncf/xds proposals/TP2-dynamically-generated-cacheable-xds-resources.md;
// docs/protocol.md §4): the Params a subscriber sends, the Constraints a resource
// variant carries, and everything the rest of xdsd needs to do with them.
//
// It owns:
//   - evaluation (Constraints.Match), because servers, clients and relays must
//     all pick variants by exactly the same rules;
//   - a canonical form and key (Constraints.Key), because TP2 makes the
//     constraints part of a resource's identity, so operand order and other
//     spellings of the same expression must not create distinct variants;
//   - the text syntax of docs/architecture.md §4.2 (Parse, Constraints.String), which
//     prints and parses every canonical form, including the constant false;
//   - conversion to and from the wire proto (Constraints.Proto, FromProto),
//     bounded so hostile input cannot exhaust the stack;
//   - validation of the variant set of one resource (ValidateVariants):
//     TP2's "same set of keys, non-overlapping" rule, with a witness parameter
//     set when two variants overlap.
//
// The package sits at the bottom of the module's import graph and must not
// import anything else in this module, so that every layer (resource, db,
// protocol, client, the roles and the CLI) can share one implementation.
package constraint
