package inspect

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/name"
	"github.com/xdsd/xdsd/resource"
)

// Config is the client an inspection runs as: where its servers are and
// what it presents to them.
type Config struct {
	// Cmd is "get" or "watch": the default node id is xdsd-Cmd.
	Cmd string
	// Server is the xDS server's address, used when no bootstrap is given;
	// ServerSet says it was given explicitly, which rules out the
	// environment's bootstrap.
	Server    string
	ServerSet bool
	// Bootstrap is a gRPC xDS bootstrap file ("": none).
	Bootstrap string
	// NodeID is the node id to present ("": the bootstrap's, else
	// xdsd-Cmd).
	NodeID string
	// Delta selects delta xDS, or SotW, when DeltaSet says it was given;
	// otherwise SotW for Server and each server's own transport in a
	// bootstrap.
	Delta, DeltaSet bool
	// Params are the TP2 dynamic parameters to send.
	Params map[string]string
	// Computed are the computed attributes added to each xdstp:// name as
	// xds.resource.KEY=VALUE context parameters (TP1).
	Computed map[string]string
	// Timeout bounds the wait for answers (get), or is the does-not-exist
	// timeout (watch).
	Timeout time.Duration
}

// The environment variables gRPC reads its bootstrap from (docs/architecture.md §4.4;
// the file wins when both are set, as in gRPC).
const (
	EnvBootstrapFile   = "GRPC_XDS_BOOTSTRAP"
	EnvBootstrapConfig = "GRPC_XDS_BOOTSTRAP_CONFIG"
)

// bootstrapJSON reads the bootstrap get and watch start from: the file
// given, else (with no Server) the environment's, else none.
func bootstrapJSON(cfg *Config) (data []byte, from string, err error) {
	switch {
	case cfg.Bootstrap != "":
		data, err = os.ReadFile(cfg.Bootstrap)
		return data, cfg.Bootstrap, err
	case cfg.ServerSet:
		return nil, "", nil
	case os.Getenv(EnvBootstrapFile) != "":
		path := os.Getenv(EnvBootstrapFile)
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", EnvBootstrapFile, err)
		}
		return data, path, nil
	case os.Getenv(EnvBootstrapConfig) != "":
		return []byte(os.Getenv(EnvBootstrapConfig)), EnvBootstrapConfig, nil
	}
	return nil, "", nil
}

// Bootstrap builds the bootstrap get and watch use: the file given (or
// the environment's), or one for Server; Params and Delta override it;
// every authority the names use is mapped (to the top-level servers
// unless the file says more).
func Bootstrap(cfg *Config, typ *resource.Type, names []string) (*client.Bootstrap, error) {
	doc := map[string]any{}
	data, from, err := bootstrapJSON(cfg)
	if err != nil {
		return nil, err
	}
	if data != nil {
		// Check the bootstrap as given first, so that its errors name it.
		if _, err := client.ParseBootstrapFrom(data, from); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("bootstrap %s: %v", from, err)
		}
	} else {
		doc["xds_servers"] = []any{map[string]any{"server_uri": cfg.Server, "channel_creds": []any{map[string]any{"type": "insecure"}}}}
	}
	setNode(doc, cfg)
	auths, _ := doc["authorities"].(map[string]any)
	if auths == nil {
		auths = map[string]any{}
	}
	setTransport(doc, auths, cfg, data == nil, typ, names)
	for _, n := range names {
		if u, err := name.Parse(n); err == nil && u.IsXDSTP() {
			if _, ok := auths[u.Authority]; !ok {
				auths[u.Authority] = map[string]any{}
			}
		}
	}
	if len(cfg.Params) > 0 {
		doc["dynamic_parameters"] = cfg.Params
		for k, a := range auths {
			m, _ := a.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			m["dynamic_parameters"] = cfg.Params
			auths[k] = m
		}
	}
	doc["authorities"] = auths
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return client.ParseBootstrap(js)
}

// setNode sets the bootstrap's node id: NodeID when given, else the
// bootstrap's own, else xdsd-Cmd.
func setNode(doc map[string]any, cfg *Config) {
	node, _ := doc["node"].(map[string]any)
	if node == nil {
		node = map[string]any{}
	}
	if cfg.NodeID != "" || node["id"] == nil {
		id := cfg.NodeID
		if id == "" {
			id = "xdsd-" + cfg.Cmd
		}
		node["id"] = id
	}
	doc["node"] = node
}

// setTransport sets every server's transport: Delta (or SotW) when given;
// delta for what only delta can fetch; otherwise SotW for a bootstrap made
// for Server (made), and each server's own "transport" in a bootstrap.
func setTransport(doc, auths map[string]any, cfg *Config, made bool, typ *resource.Type, names []string) {
	delta, override := cfg.Delta, cfg.DeltaSet || made
	if typ.URL == resource.VirtualHostURL {
		delta, override = true, true
	}
	for _, n := range names {
		if u, err := name.Parse(n); err == nil && u.Glob {
			delta, override = true, true
		}
	}
	if !override {
		return
	}
	transport := "sotw"
	if delta {
		transport = "delta"
	}
	set := func(servers any) {
		list, _ := servers.([]any)
		for _, s := range list {
			if m, ok := s.(map[string]any); ok {
				m["transport"] = transport
			}
		}
	}
	set(doc["xds_servers"])
	for _, a := range auths {
		if m, ok := a.(map[string]any); ok {
			set(m["xds_servers"])
		}
	}
}

// StartClient starts the client get and watch use. doesNotExist is its
// does-not-exist timeout (negative: none).
func StartClient(cfg *Config, typ *resource.Type, names []string, doesNotExist time.Duration, logger *slog.Logger) (*client.Client, error) {
	b, err := Bootstrap(cfg, typ, names)
	if err != nil {
		return nil, err
	}
	if err := b.CheckCredentials(); err != nil {
		return nil, err
	}
	return client.New(b, client.Options{DoesNotExistTimeout: doesNotExist, Logger: logger})
}
