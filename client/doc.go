// Package client is an xDS client library for Go programs: it reads
// configuration from any xDS management server (xdsd's server or relay,
// go-control-plane, Istio, …) the way gRPC and Envoy do, and tells the
// program what each watched resource is and how it changes.
//
// # Using it
//
// A Client is made from a Bootstrap — the gRPC bootstrap format (gRFC A27,
// A47), read with LoadBootstrap, BootstrapFromEnv or ParseBootstrap, or
// built as a struct — and Options. Watch subscribes to a resource by type
// URL and name and calls a Handler with each Event (Updated, Removed,
// DoesNotExist, Errored); WatchTyped does the same with the resource
// decoded as its Go message type. Close stops everything. Upstreams and
// Stats report the streams and what they carry.
//
// It speaks delta or SotW over ADS, ACKs and NACKs (Options.Validate adds
// the program's own checks), reconnects with backoff and falls back to the
// next server, and follows TP1 names across authorities: collections,
// redirects, #alt= failover. TP2 dynamic parameters come from the
// bootstrap (Bootstrap.DynamicParameters), and on-demand VHDS names
// ("<route config>/<host>") are fetched by delta subscription.
//
// How it works inside is internal/clientcore's, the engine this package
// is the face of: each method here calls the engine's, and the engine
// builds and reads the data types in client/clientdata, which this package
// names. The relay runs the same engine under its cache policy.
package client
