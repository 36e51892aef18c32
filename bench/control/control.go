// Package control is the protocol between the benchmark driver
// (cmd/xdsbench), the servers under test (cmd/benchserver) and the load
// generator (cmd/loadgen). Everything here is plain data, JSON-encoded.
package control

// Resource naming shared by every server and the load generator.
const (
	// ClusterFormat names cluster i ("c-<i>").
	ClusterFormat = "c-%d"
	// GlobMemberFormat names member i of the glob collection.
	GlobMemberFormat = "xdstp://bench/envoy.config.cluster.v3.Cluster/pool/c-%d"
	// GlobURL is the glob collection holding them.
	GlobURL = "xdstp://bench/envoy.config.cluster.v3.Cluster/pool/*"
	// MarkerFormat is the alt_stat_name a changed cluster carries in round
	// n: the load generator finds it in the raw bytes of a response.
	MarkerFormat = "round-%d-mark"
)

// Setup is POST /setup on a bench server: create the initial resources.
// Clusters are envoy.config.cluster.v3.Cluster{name, type EDS,
// eds_cluster_config{eds_config{ads{}}}, alt_stat_name "initial",
// plus PaddingBytes bytes in metadata so sizes are realistic}.
type Setup struct {
	Clusters     int  `json:"clusters"`      // named c-0 … c-(n-1)
	Glob         bool `json:"glob"`          // name them as glob members instead (xdsd only)
	Variants     int  `json:"variants"`      // >1: each cluster has this many TP2 variants over key "v" = "0".."n-1" (xdsd only)
	PaddingBytes int  `json:"padding_bytes"` // extra payload per cluster (default 200)
}

// Change is POST /change: change the first Count clusters (all their
// variants) to carry MarkerFormat(Round) as alt_stat_name, and push. It
// answers once the server has taken the change (before it is pushed).
type Change struct {
	Round int `json:"round"`
	Count int `json:"count"`
}

// ServerStats is the answer of POST /gc (after runtime.GC and
// debug.FreeOSMemory) and GET /stats.
type ServerStats struct {
	PID        int   `json:"pid"`
	RSSBytes   int64 `json:"rss_bytes"`   // VmRSS
	HeapBytes  int64 `json:"heap_bytes"`  // runtime HeapInuse
	StackBytes int64 `json:"stack_bytes"` // runtime StackInuse (goroutine stacks)
	Goroutines int   `json:"goroutines"`  // runtime.NumGoroutine
	Streams    int   `json:"streams"`     // xDS streams open, as the server counts them
	CPUNanos   int64 `json:"cpu_nanos"`   // utime+stime of the process
	EncodedLen int   `json:"encoded_len"` // bytes of one cluster's encoded payload, after setup
}

// Command is one line the driver writes to the load generator's stdin.
type Command struct {
	Cmd string `json:"cmd"` // "connect", "expect", "t0", "quit"

	// connect: open Streams streams to Addr, over Conns connections, each
	// subscribing (SotW ADS or delta ADS) to the cluster type with Names,
	// or Wildcard, or the Glob URL. With Params, stream i subscribes by
	// TP2 resource locators with Params[i % len(Params)]. Every response is
	// ACKed. The load generator answers "connected" once every stream has
	// had a response holding all it subscribed to (with Expect resources:
	// for a glob or wildcard, the count to wait for).
	Addr     string              `json:"addr,omitempty"`
	Streams  int                 `json:"streams,omitempty"`
	Conns    int                 `json:"conns,omitempty"`
	Delta    bool                `json:"delta,omitempty"`
	Names    []string            `json:"names,omitempty"`
	Wildcard bool                `json:"wildcard,omitempty"`
	Glob     string              `json:"glob,omitempty"`
	Params   []map[string]string `json:"params,omitempty"`
	Expect   int                 `json:"expect,omitempty"`
	// Addrs, instead of Addr, spreads the connections over several
	// servers in turn (the leaves of a tree of relays).
	Addrs []string `json:"addrs,omitempty"`
	// TLSCA makes the connections TLS, verifying the server with the CA
	// certificates (PEM) in that file; TLSCert and TLSKey, files too,
	// are the client certificate presented for mTLS.
	TLSCA   string `json:"tls_ca,omitempty"`
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`

	// expect: from now on, note when each stream receives a response
	// containing Marker (raw bytes); answer "received" when all have, or
	// after TimeoutMS. T0 is the driver's clock (Unix nanoseconds) when it
	// made the change, the zero of the latencies.
	Marker    string `json:"marker,omitempty"`
	T0        int64  `json:"t0,omitempty"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
	// Ack asks for an "expecting" event once the expect is in force, so
	// the driver makes the change only after every stream is watching; the
	// driver then sends "t0" with T0 taken just before the change.
	Ack bool `json:"ack,omitempty"`
}

// Event is one line the load generator writes to stdout.
type Event struct {
	Event string `json:"event"` // "connected", "expecting", "received", "error"

	// connected: every stream has its first full answer; MS is the time
	// from the connect command to the last one's.
	Streams int     `json:"streams,omitempty"`
	MS      float64 `json:"ms,omitempty"`

	// received: latencies from T0 to each stream's response carrying the
	// marker, in milliseconds; Missing streams never got it.
	P50MS     float64 `json:"p50_ms,omitempty"`
	P99MS     float64 `json:"p99_ms,omitempty"`
	MaxMS     float64 `json:"max_ms,omitempty"`
	Missing   int     `json:"missing,omitempty"`
	Responses int64   `json:"responses,omitempty"` // responses received by all streams since expect
	// BytesPerStream is the mean bytes received per stream since expect
	// (gRPC message bytes, not counting HTTP/2 framing).
	BytesPerStream float64 `json:"bytes_per_stream,omitempty"`

	Error string `json:"error,omitempty"`
}
