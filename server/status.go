package server

import (
	"time"

	"github.com/xdsd/xdsd/internal/protocol"
)

// StreamStatus is one connected xDS stream, as the server sees it.
type StreamStatus struct {
	ID        uint64            // unique within the server's life
	NodeID    string            // node.id
	Cluster   string            // node.cluster
	Address   string            // the peer's address
	Kind      string            // "ads-sotw" or "ads-delta"; "sotw" or "delta" for a per-type service
	Connected time.Time         // when the stream opened
	Params    map[string]string // the node's TP2 dynamic parameters
	Types     []TypeStatus      // per resource type, in ADS order
}

// TypeStatus is a stream's state for one resource type: what it asked
// for, what it was sent, what it accepted or rejected, and which variant
// of each resource it holds.
type TypeStatus struct {
	URL           string   // the type URL
	Subscriptions []string // subscribed names ("*" for a wildcard)
	SentVersion   string   // last version sent (SotW) or "" (delta)
	AckedVersion  string   // last version ACKed (SotW)
	Nacks         int      // NACKs received
	// LastNack is the error of the last NACK and the version it
	// rejected, when there was one.
	LastNack        string
	LastNackVersion string
	// Held is what the stream holds (delta) or was last sent (SotW).
	Held []Held
}

// Held is one variant a stream holds, or a name it was told does not
// exist.
type Held struct {
	Name        string
	Constraints string // the TP2 constraints of the variant held, in text syntax
	Version     string
	Absent      bool // told the resource does not exist
}

// Streams reports the connected streams: the status the admin API's
// /v1/clients shows, without the admin API.
func (s *Server) Streams() []StreamStatus { return streamStatus(s.core.Streams()) }

func streamStatus(cs []protocol.StreamStatus) []StreamStatus {
	out := make([]StreamStatus, 0, len(cs))
	for _, c := range cs {
		st := StreamStatus{ID: c.ID, NodeID: c.NodeID, Cluster: c.Cluster, Address: c.Address, Kind: c.Kind,
			Connected: c.Connected, Params: c.Params}
		for _, t := range c.Types {
			ts := TypeStatus{URL: t.URL, SentVersion: t.SentVersion, AckedVersion: t.AckedVersion, Nacks: t.Nacks}
			for _, sub := range t.Subscriptions {
				ts.Subscriptions = append(ts.Subscriptions, sub.Name)
			}
			if t.LastNack != nil {
				ts.LastNack, ts.LastNackVersion = t.LastNack.Error, t.LastNack.Version
			}
			for _, h := range t.Held {
				ts.Held = append(ts.Held, Held{Name: h.Name, Constraints: h.Constraints, Version: h.Version, Absent: h.Absent})
			}
			st.Types = append(st.Types, ts)
		}
		out = append(out, st)
	}
	return out
}
