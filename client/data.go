package client

import "github.com/xdsd/xdsd/client/clientdata"

// The client's data types are package clientdata's, where each is
// documented: the client's engine (internal/clientcore) builds and reads
// them, and it cannot import this package, which is its face.

// Bootstrap is a gRPC xDS bootstrap plus TP2's dynamic parameters
// (clientdata.Bootstrap).
type Bootstrap = clientdata.Bootstrap

// ServerConfig is one entry of "xds_servers" (clientdata.ServerConfig).
type ServerConfig = clientdata.ServerConfig

// ChannelCreds is one entry of a server's "channel_creds"
// (clientdata.ChannelCreds).
type ChannelCreds = clientdata.ChannelCreds

// Authority is one entry of "authorities" (clientdata.Authority).
type Authority = clientdata.Authority

// Options tune a Client. The zero value is usable (clientdata.Options).
type Options = clientdata.Options

// Event is what a watcher is told (clientdata.Event).
type Event = clientdata.Event

// EventKind says what happened to a watched resource
// (clientdata.EventKind).
type EventKind = clientdata.EventKind

// The kinds of events.
const (
	// Updated: the resource arrived or changed.
	Updated = clientdata.Updated
	// Removed: the server deleted a resource the watcher had.
	Removed = clientdata.Removed
	// DoesNotExist: the server says the resource does not exist, or it did
	// not come within Options.DoesNotExistTimeout.
	DoesNotExist = clientdata.DoesNotExist
	// Errored: the resource was rejected (and NACKed), or cannot be fetched;
	// Variant holds the last good value, if any.
	Errored = clientdata.Errored
)

// CollectionMember is one member of a list collection
// (clientdata.CollectionMember).
type CollectionMember = clientdata.CollectionMember

// Stats are a client's counters, for tests and diagnostics
// (clientdata.Stats).
type Stats = clientdata.Stats

// Upstream is one upstream stream as admin pages show it
// (clientdata.Upstream).
type Upstream = clientdata.Upstream

// ParseBootstrap parses and validates a bootstrap. Its errors name the JSON
// field path, e.g. `bootstrap: xds_servers[1].server_uri: missing`.
func ParseBootstrap(data []byte) (*Bootstrap, error) { return clientdata.ParseBootstrap(data) }

// LoadBootstrap reads and parses the bootstrap file at path. Its errors name
// the file.
func LoadBootstrap(path string) (*Bootstrap, error) { return clientdata.LoadBootstrap(path) }

// ParseBootstrapFrom is ParseBootstrap for a bootstrap read from somewhere
// (a file, an environment variable): its errors name it, e.g.
// `bootstrap b.json: xds_servers[1].server_uri: missing`.
func ParseBootstrapFrom(data []byte, from string) (*Bootstrap, error) {
	return clientdata.ParseBootstrapFrom(data, from)
}

// BootstrapFromEnv reads the bootstrap as gRPC does: from the file named by
// GRPC_XDS_BOOTSTRAP or, when that is unset or empty, from the JSON in
// GRPC_XDS_BOOTSTRAP_CONFIG. It is an error when neither is set.
func BootstrapFromEnv() (*Bootstrap, error) { return clientdata.BootstrapFromEnv() }
