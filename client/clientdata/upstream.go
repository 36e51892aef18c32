package clientdata

// Stats are a client's counters, for tests and diagnostics.
type Stats struct {
	Responses int64 // responses received
	Resources int64 // resources received (and accepted)
	NACKs     int64 // responses NACKed
	Connected int   // channels with a healthy stream
}

// Upstream is one upstream stream as admin pages show it.
type Upstream struct {
	Servers []string `json:"servers"`
	// Connected is the server streaming, if any: its stream has answered,
	// or stayed open a while.
	Connected string `json:"connected,omitempty"`
	// Connecting is the server a stream is open to that has not yet proved
	// healthy (it may still fail at once, as a server that is not an xDS
	// server does).
	Connecting string `json:"connecting,omitempty"`
	// DownSince is when the last healthy stream ended (or the client
	// started), while none is.
	DownSince     string `json:"down_since,omitempty"`
	LastError     string `json:"last_error,omitempty"`
	Subscriptions int    `json:"subscriptions"`
	Responses     int64  `json:"responses"`
	Resources     int64  `json:"resources"`
	NACKs         int64  `json:"nacks"`
}
