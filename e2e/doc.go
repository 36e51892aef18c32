// Package e2e holds end-to-end tests: real `xdsd serve` processes, real
// gRPC backends and the real grpc-go xDS client, all on loopback. It has no
// code of its own and is imported by nothing.
package e2e
