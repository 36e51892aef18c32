package clientdata

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/internal/mtls"
)

// The environment variables gRPC reads its bootstrap from (gRFC A27). The
// file wins when both are set, as in every gRPC language.
const (
	envBootstrapFile   = "GRPC_XDS_BOOTSTRAP"
	envBootstrapConfig = "GRPC_XDS_BOOTSTRAP_CONFIG"
)

// Bootstrap is a gRPC xDS bootstrap (the JSON grpc-go, grpc-java, grpc-js and
// C-core read) plus TP2's dynamic parameters (docs/architecture.md §4.4).
//
// ParseBootstrap accepts the bootstraps grpc-go accepts: unknown fields are
// ignored, because bootstraps carry fields for other languages, and keys
// match as in grpc-go. Besides validating the xdsd and TP2 fields grpc-go
// does not know, it is stricter in two places only, both mistakes in any
// language: a channel_creds entry without a type (grpc-go skips it), and
// an authority template that does not start with "xdstp://<authority>/"
// (grpc-go checks the prefix without the final '/', so "xdstp://a.example.org/"
// passes for authority "a.example"). A channel_creds list of types this
// client does not support is an error, as in grpc-go, and so is a
// misconfigured entry of the type that would be used; TransportCredentials
// reports what only dialing finds (an unreadable certificate file).
//
// A Bootstrap is not modified by its methods, so one may be shared between
// goroutines.
type Bootstrap struct {
	// Servers is "xds_servers": the management servers for legacy names and
	// for authorities that list none, in order of preference. At least one.
	Servers []ServerConfig
	// Node is "node", as proto JSON of envoy.config.core.v3.Node, kept as
	// given: client features are the transport's to add. Never nil after
	// ParseBootstrap (empty when the bootstrap has none).
	Node *corev3.Node
	// Authorities is "authorities" (gRFC A47). The key "" is the authority of
	// "xdstp:///..." names.
	Authorities map[string]*Authority
	// ClientDefaultListenerResourceNameTemplate is
	// "client_default_listener_resource_name_template", used for targets
	// without an authority ("xds:///svc"). Defaults to "%s".
	ClientDefaultListenerResourceNameTemplate string
	// ServerListenerResourceNameTemplate is
	// "server_listener_resource_name_template", for xDS-enabled gRPC servers.
	ServerListenerResourceNameTemplate string
	// CertificateProviders is "certificate_providers", kept, not interpreted.
	CertificateProviders map[string]json.RawMessage
	// DynamicParameters is the top-level "dynamic_parameters" (TP2 "Client
	// Configuration"): the parameters sent with legacy (non-xdstp) names.
	// Nil when the bootstrap has none; non-nil but empty for an explicit {}.
	DynamicParameters map[string]string
	// NodeMetadataAsParameters is the xdsd extension
	// "node_metadata_as_dynamic_parameters": when true, a client sends the
	// string fields of node.metadata as dynamic parameters where none are
	// configured (TP2 "Migrating From Node Metadata").
	NodeMetadataAsParameters bool
}

// ServerConfig is one entry of "xds_servers".
type ServerConfig struct {
	// URI is "server_uri", the gRPC target of the management server.
	URI string
	// ChannelCreds is "channel_creds": at least one; the first type this
	// client supports is used (gRFC A27).
	ChannelCreds []ChannelCreds
	// ServerFeatures is "server_features". Unknown features, such as
	// "xds_v3", are kept and mean nothing.
	ServerFeatures []string
	// Transport is the xdsd extension "transport": "delta", "sotw", or ""
	// (absent), which means delta.
	Transport string
}

// ChannelCreds is one entry of a server's "channel_creds".
type ChannelCreds struct {
	Type   string          // "type": "insecure", "tls", "google_default", ...
	Config json.RawMessage // "config", nil when absent
}

// Authority is one entry of "authorities" (gRFC A47), extended with TP2's
// per-authority dynamic parameters.
type Authority struct {
	// ClientListenerResourceNameTemplate is
	// "client_listener_resource_name_template". It starts with
	// "xdstp://<authority>/"; ParseBootstrap fills in the default,
	// "xdstp://<authority>/envoy.config.listener.v3.Listener/%s".
	ClientListenerResourceNameTemplate string
	// Servers is the authority's "xds_servers"; empty means the top-level
	// servers.
	Servers []ServerConfig
	// DynamicParameters is the authority's "dynamic_parameters", sent with
	// xdstp names of this authority. Nil when absent, in which case the
	// top-level ones apply; non-nil but empty for an explicit {}, which sends
	// none.
	DynamicParameters map[string]string
}

// ParseBootstrap parses and validates a bootstrap. Its errors name the JSON
// field path, e.g. `bootstrap: xds_servers[1].server_uri: missing`.
func ParseBootstrap(data []byte) (*Bootstrap, error) {
	b, err := parseBootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return b, nil
}

// LoadBootstrap reads and parses the bootstrap file at path. Its errors name
// the file.
func LoadBootstrap(path string) (*Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return ParseBootstrapFrom(data, path)
}

// ParseBootstrapFrom is ParseBootstrap for a bootstrap read from somewhere
// (a file, an environment variable): its errors name it, e.g.
// `bootstrap b.json: xds_servers[1].server_uri: missing`.
func ParseBootstrapFrom(data []byte, from string) (*Bootstrap, error) {
	b, err := parseBootstrap(data)
	if err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", from, err)
	}
	return b, nil
}

// CheckCredentials builds the transport credentials of every server, the
// top-level ones and every authority's, as dialing them would, and returns
// the first failure (a "tls" certificate file that cannot be read), naming
// the server and its authority. ParseBootstrap has already checked what
// can be checked without reading files; a long-running process calls this
// at startup so that such a server fails it then, rather than leaving
// every name it serves unanswered.
func (b *Bootstrap) CheckCredentials() error {
	check := func(servers []ServerConfig, path string) error {
		for i, s := range servers {
			if _, err := s.TransportCredentials(); err != nil {
				return fmt.Errorf("bootstrap: %s[%d]: %w", path, i, err)
			}
		}
		return nil
	}
	if err := check(b.Servers, "xds_servers"); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(b.Authorities)) {
		if a := b.Authorities[name]; a != nil {
			if err := check(a.Servers, bsField(bsKey("authorities", name), "xds_servers")); err != nil {
				return err
			}
		}
	}
	return nil
}

// BootstrapFromEnv reads the bootstrap as gRPC does: from the file named by
// GRPC_XDS_BOOTSTRAP or, when that is unset or empty, from the JSON in
// GRPC_XDS_BOOTSTRAP_CONFIG. It is an error when neither is set.
func BootstrapFromEnv() (*Bootstrap, error) {
	if path := os.Getenv(envBootstrapFile); path != "" {
		return LoadBootstrap(path)
	}
	if data := os.Getenv(envBootstrapConfig); data != "" {
		b, err := parseBootstrap([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("bootstrap from %s: %w", envBootstrapConfig, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("bootstrap: neither %s nor %s is set", envBootstrapFile, envBootstrapConfig)
}

// ServersFor returns the servers for resource names of an authority. A
// legacy (non-xdstp) name gets the top-level servers. An xdstp name gets its
// authority's servers, or the top-level ones when the authority lists none;
// an authority missing from the bootstrap is an error, because gRFC A47 fails
// a name whose authority is not configured rather than guessing a server.
//
// The returned slice is the bootstrap's own; do not modify it.
func (b *Bootstrap) ServersFor(authority string, legacy bool) ([]ServerConfig, error) {
	servers := b.Servers
	if !legacy {
		a, ok := b.Authorities[authority]
		if !ok {
			return nil, fmt.Errorf("bootstrap: authority %q is not in \"authorities\"", authority)
		}
		if a != nil && len(a.Servers) > 0 {
			servers = a.Servers
		}
	}
	if len(servers) == 0 {
		return nil, errors.New("bootstrap: no xds_servers")
	}
	return servers, nil
}

// ParamsFor returns the TP2 dynamic parameters subscriptions of an authority
// carry. A legacy name gets the top-level dynamic_parameters. An xdstp name
// gets its authority's dynamic_parameters, else (also when the authority is
// not in the bootstrap) the top-level ones. (gRFC A67,
// a draft, would not fall back for xdstp names; xdsd does, so one top-level
// map can serve every authority.) When neither is set and
// NodeMetadataAsParameters is on, the string fields of node.metadata are the
// parameters.
//
// The bool reports whether there are parameters to send, and so whether the
// names must go out as TP2 resource locators; when false the map is nil and
// names go out plain, as A67 does for empty parameters. An explicit empty
// dynamic_parameters ({}) counts as set: it stops the fallbacks and sends
// none. The map is a copy.
func (b *Bootstrap) ParamsFor(authority string, legacy bool) (map[string]string, bool) {
	p := b.DynamicParameters
	if !legacy {
		if a := b.Authorities[authority]; a != nil && a.DynamicParameters != nil {
			p = a.DynamicParameters
		}
	}
	if p == nil && b.NodeMetadataAsParameters {
		p = metadataParams(b.Node)
	}
	if len(p) == 0 {
		return nil, false
	}
	return maps.Clone(p), true
}

// metadataParams returns the top-level string fields of the node's metadata:
// TP2 parameters are strings, so numbers, bools and structs have no
// translation and are left out.
func metadataParams(n *corev3.Node) map[string]string {
	p := map[string]string{}
	for k, v := range n.GetMetadata().GetFields() {
		if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			p[k] = s.StringValue
		}
	}
	return p
}

// ListenerName returns the Listener resource name a gRPC client subscribes to
// for the target "xds://authority/service", as gRPC does (gRFC A47): an empty
// authority uses client_default_listener_resource_name_template, any other
// the authority's template, and an authority missing from the bootstrap is an
// error. "%s" in the template is replaced by the service; a template starting
// with "xdstp:" gets it percent-encoded as a URL path, keeping '/'.
func (b *Bootstrap) ListenerName(authority, service string) (string, error) {
	var tmpl string
	if authority == "" {
		tmpl = b.ClientDefaultListenerResourceNameTemplate
		if tmpl == "" {
			tmpl = "%s"
		}
	} else {
		a, ok := b.Authorities[authority]
		if !ok {
			return "", fmt.Errorf("bootstrap: authority %q is not in \"authorities\"", authority)
		}
		if a != nil {
			tmpl = a.ClientListenerResourceNameTemplate
		}
		if tmpl == "" {
			tmpl = defaultAuthorityTemplate(authority)
		}
	}
	if !strings.Contains(tmpl, "%s") {
		return tmpl, nil
	}
	if strings.HasPrefix(tmpl, "xdstp:") {
		segs := strings.Split(service, "/")
		for i, s := range segs {
			segs[i] = url.PathEscape(s)
		}
		service = strings.Join(segs, "/")
	}
	return strings.ReplaceAll(tmpl, "%s", service), nil
}

// authorityPrefix is what an authority's listener template must start with.
// grpc-go escapes the authority the same way when it checks the prefix.
func authorityPrefix(authority string) string {
	return "xdstp://" + url.PathEscape(authority) + "/"
}

func defaultAuthorityTemplate(authority string) string {
	return authorityPrefix(authority) + "envoy.config.listener.v3.Listener/%s"
}

// TransportCredentials returns gRPC transport credentials for the first
// channel_creds type this client supports, skipping the others as gRPC does:
//   - "insecure": plaintext;
//   - "tls" (gRFC A65): TLS with the system roots, or with the config
//     {"ca_certificate_file", "certificate_file", "private_key_file"}, the
//     latter two (given together) for mTLS. The files are read now and
//     re-read on a handshake after they change, as gRPC's file-watcher
//     certificate provider does: a rotation needs no restart.
//
// Other types, such as "google_default", are skipped; when none is supported
// the error names the types.
func (s ServerConfig) TransportCredentials() (credentials.TransportCredentials, error) {
	var types []string
	for i, cc := range s.ChannelCreds {
		switch cc.Type {
		case "insecure":
			return insecure.NewCredentials(), nil
		case "tls":
			c, err := tlsCredentials(cc.Config)
			if err != nil {
				return nil, fmt.Errorf("server %q: channel_creds[%d] (tls): %w", s.URI, i, err)
			}
			return c, nil
		}
		types = append(types, cc.Type)
	}
	return nil, fmt.Errorf("server %q: no supported channel_creds type in %q (supported: \"insecure\", \"tls\")", s.URI, types)
}

// tlsConfigJSON is the config of the "tls" channel creds type (gRFC A65),
// the file-watcher certificate provider's fields.
type tlsConfigJSON struct {
	CACertificateFile string `json:"ca_certificate_file"`
	CertificateFile   string `json:"certificate_file"`
	PrivateKeyFile    string `json:"private_key_file"`
}

// parseTLSConfig parses and checks the config of a "tls" channel_creds
// entry, without reading the files it names.
func parseTLSConfig(config json.RawMessage) (tlsConfigJSON, error) {
	var c tlsConfigJSON
	if !jsonAbsent(config) {
		if err := json.Unmarshal(config, &c); err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
	}
	if (c.CertificateFile == "") != (c.PrivateKeyFile == "") {
		return c, errors.New("config: certificate_file and private_key_file must be given together")
	}
	return c, nil
}

// supportedCreds are the channel_creds types TransportCredentials builds.
var supportedCreds = []string{"insecure", "tls"}

// checkChannelCreds checks at parse time what TransportCredentials would
// use for the server: the first supported type, and its config. path is
// the server's "channel_creds".
func checkChannelCreds(s ServerConfig, path string) error {
	var types []string
	for i, cc := range s.ChannelCreds {
		if !slices.Contains(supportedCreds, cc.Type) {
			types = append(types, cc.Type)
			continue
		}
		if cc.Type == "tls" {
			if _, err := parseTLSConfig(cc.Config); err != nil {
				return &bootstrapError{path: bsIndex(path, i), msg: fmt.Sprintf("server %q: tls: %v", s.URI, err), err: err}
			}
		}
		return nil
	}
	return bsErrorf(path, "server %q: no supported channel_creds type in %q (supported: %q)", s.URI, types, supportedCreds)
}

func tlsCredentials(config json.RawMessage) (credentials.TransportCredentials, error) {
	c, err := parseTLSConfig(config)
	if err != nil {
		return nil, err
	}
	return mtls.NewClient(c.CACertificateFile, c.CertificateFile, c.PrivateKeyFile, nil)
}

// Delta reports whether the server is to be spoken to with delta xDS, the
// default, rather than SotW.
func (s ServerConfig) Delta() bool { return s.Transport != "sotw" }

// Key identifies a server for channel sharing: authorities that name the
// same server (URI, credentials, features and transport) share one ADS
// stream. Formatting differences in the credentials' config, the order of
// features and an absent versus explicit "delta" transport do not matter.
func (s ServerConfig) Key() string {
	type credsKey struct {
		Type   string          `json:"t"`
		Config json.RawMessage `json:"c,omitempty"`
	}
	k := struct {
		URI       string     `json:"u"`
		Creds     []credsKey `json:"c"`
		Features  []string   `json:"f"`
		Transport string     `json:"t"`
	}{URI: s.URI, Transport: "delta"}
	if !s.Delta() {
		k.Transport = "sotw"
	}
	for _, cc := range s.ChannelCreds {
		k.Creds = append(k.Creds, credsKey{Type: cc.Type, Config: canonicalJSON(cc.Config)})
	}
	k.Features = slices.Compact(slices.Sorted(slices.Values(s.ServerFeatures)))
	out, _ := json.Marshal(k) // cannot fail: strings and valid JSON only
	return string(out)
}

// canonicalJSON re-encodes JSON with sorted object keys and no spaces, so
// equal configs written differently give one key. Invalid JSON is quoted.
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	if jsonAbsent(raw) {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err == nil {
		if out, err := json.Marshal(v); err == nil {
			return out
		}
	}
	out, _ := json.Marshal(string(raw))
	return out
}
