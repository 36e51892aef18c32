// Command xdsd is the xDS control plane, caching relay and client tool:
//
//	xdsd serve    serve resources from a store over xDS, with an admin API
//	xdsd relay    a caching xDS proxy in front of one or more servers
//	xdsd apply    apply resource files to a running server, as one batch
//	xdsd delete   delete a resource, or one of its variants
//	xdsd validate check resource files offline
//	xdsd get      print what a client with given dynamic parameters gets
//	xdsd watch    print every update such a client gets, until interrupted
//
// Exit status: 0 on success, 1 on a runtime failure or invalid input, 2 on
// bad usage. It is the one binary; nothing imports it.
package main
