package client

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
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
//     latter two (given together) for mTLS. The files are read now, not
//     watched: a new call picks up rotated files.
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
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACertificateFile != "" {
		pem, err := os.ReadFile(c.CACertificateFile)
		if err != nil {
			return nil, fmt.Errorf("ca_certificate_file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_certificate_file: no PEM certificate in %s", c.CACertificateFile)
		}
		tc.RootCAs = roots
	}
	if c.CertificateFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertificateFile, c.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("certificate_file/private_key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc), nil
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

// Parsing.
//
// Every field is first taken as raw JSON with encoding/json and a struct, as
// grpc-go does, so keys match the same way (case-insensitively, the last of
// duplicates winning), and then decoded on its own so that an error can name
// its path.

// bootstrapError is a bootstrap validation error at a JSON field path.
type bootstrapError struct {
	path string // e.g. `xds_servers[1].server_uri`; "" for the document
	msg  string
	err  error // the underlying error, if any
}

func (e *bootstrapError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

func (e *bootstrapError) Unwrap() error { return e.err }

func bsErrorf(path, format string, args ...any) error {
	return &bootstrapError{path: path, msg: fmt.Sprintf(format, args...)}
}

func bsField(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func bsIndex(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

func bsKey(path, key string) string { return fmt.Sprintf("%s[%q]", path, key) }

type bootstrapJSON struct {
	XDSServers                                json.RawMessage `json:"xds_servers"`
	Node                                      json.RawMessage `json:"node"`
	Authorities                               json.RawMessage `json:"authorities"`
	ClientDefaultListenerResourceNameTemplate json.RawMessage `json:"client_default_listener_resource_name_template"`
	ServerListenerResourceNameTemplate        json.RawMessage `json:"server_listener_resource_name_template"`
	CertificateProviders                      json.RawMessage `json:"certificate_providers"`
	DynamicParameters                         json.RawMessage `json:"dynamic_parameters"`
	NodeMetadataAsDynamicParameters           json.RawMessage `json:"node_metadata_as_dynamic_parameters"`
}

type serverJSON struct {
	ServerURI      json.RawMessage `json:"server_uri"`
	ChannelCreds   json.RawMessage `json:"channel_creds"`
	ServerFeatures json.RawMessage `json:"server_features"`
	Transport      json.RawMessage `json:"transport"`
}

type channelCredsJSON struct {
	Type   json.RawMessage `json:"type"`
	Config json.RawMessage `json:"config"`
}

type authorityJSON struct {
	ClientListenerResourceNameTemplate json.RawMessage `json:"client_listener_resource_name_template"`
	XDSServers                         json.RawMessage `json:"xds_servers"`
	DynamicParameters                  json.RawMessage `json:"dynamic_parameters"`
}

func parseBootstrap(data []byte) (*Bootstrap, error) {
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		msg := fmt.Sprintf("invalid JSON: %v", err)
		if se, ok := err.(*json.SyntaxError); ok {
			msg += fmt.Sprintf(" (at byte %d)", se.Offset)
		}
		return nil, &bootstrapError{msg: msg, err: err}
	}
	var j bootstrapJSON
	if err := bsObject(data, "", &j); err != nil {
		return nil, err
	}
	b := &Bootstrap{}
	var err error
	if jsonAbsent(j.XDSServers) {
		return nil, bsErrorf("xds_servers", "missing")
	}
	if b.Servers, err = parseServers(j.XDSServers, "xds_servers"); err != nil {
		return nil, err
	}
	if len(b.Servers) == 0 {
		return nil, bsErrorf("xds_servers", "must list at least one server")
	}
	if b.Node, err = parseNode(j.Node); err != nil {
		return nil, err
	}
	if b.ClientDefaultListenerResourceNameTemplate, err = bsString(j.ClientDefaultListenerResourceNameTemplate, "client_default_listener_resource_name_template"); err != nil {
		return nil, err
	}
	if b.ClientDefaultListenerResourceNameTemplate == "" {
		b.ClientDefaultListenerResourceNameTemplate = "%s"
	}
	if b.ServerListenerResourceNameTemplate, err = bsString(j.ServerListenerResourceNameTemplate, "server_listener_resource_name_template"); err != nil {
		return nil, err
	}
	if !jsonAbsent(j.CertificateProviders) {
		if err := bsObject(j.CertificateProviders, "certificate_providers", &b.CertificateProviders); err != nil {
			return nil, err
		}
	}
	if b.DynamicParameters, err = parseParams(j.DynamicParameters, "dynamic_parameters"); err != nil {
		return nil, err
	}
	if b.NodeMetadataAsParameters, err = bsBool(j.NodeMetadataAsDynamicParameters, "node_metadata_as_dynamic_parameters"); err != nil {
		return nil, err
	}
	if b.Authorities, err = parseAuthorities(j.Authorities); err != nil {
		return nil, err
	}
	return b, nil
}

func parseServers(raw json.RawMessage, path string) ([]ServerConfig, error) {
	if jsonAbsent(raw) {
		return nil, nil
	}
	elems, err := bsArray(raw, path)
	if err != nil {
		return nil, err
	}
	var servers []ServerConfig
	for i, e := range elems {
		// grpc-go parses a null entry (and fails only when it comes to use
		// it); skip it.
		if jsonAbsent(e) {
			continue
		}
		s, err := parseServer(e, bsIndex(path, i))
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

func parseServer(raw json.RawMessage, path string) (ServerConfig, error) {
	var s ServerConfig
	var j serverJSON
	if err := bsObject(raw, path, &j); err != nil {
		return s, err
	}
	var err error
	p := bsField(path, "server_uri")
	if jsonAbsent(j.ServerURI) {
		return s, bsErrorf(p, "missing")
	}
	if s.URI, err = bsString(j.ServerURI, p); err != nil {
		return s, err
	}
	if s.URI == "" {
		return s, bsErrorf(p, "empty")
	}

	p = bsField(path, "channel_creds")
	if jsonAbsent(j.ChannelCreds) {
		return s, bsErrorf(p, "missing")
	}
	creds, err := bsArray(j.ChannelCreds, p)
	if err != nil {
		return s, err
	}
	for i, raw := range creds {
		// grpc-go skips a null entry as a type it does not know.
		if jsonAbsent(raw) {
			continue
		}
		cp := bsIndex(p, i)
		var cj channelCredsJSON
		if err := bsObject(raw, cp, &cj); err != nil {
			return s, err
		}
		typ, err := bsString(cj.Type, bsField(cp, "type"))
		if err != nil {
			return s, err
		}
		if typ == "" {
			return s, bsErrorf(bsField(cp, "type"), "missing")
		}
		cc := ChannelCreds{Type: typ}
		if !jsonAbsent(cj.Config) {
			cc.Config = cj.Config
		}
		s.ChannelCreds = append(s.ChannelCreds, cc)
	}
	if len(s.ChannelCreds) == 0 {
		return s, bsErrorf(p, "must list at least one credentials type")
	}
	// As grpc-go does, fail now, not when the server is first dialed, when
	// no type is supported or the one that would be used is misconfigured:
	// a client (or relay) with such a server could never reach it.
	if err := checkChannelCreds(s, p); err != nil {
		return s, err
	}

	if !jsonAbsent(j.ServerFeatures) {
		p = bsField(path, "server_features")
		features, err := bsArray(j.ServerFeatures, p)
		if err != nil {
			return s, err
		}
		for i, f := range features {
			if jsonAbsent(f) {
				continue
			}
			v, err := bsString(f, bsIndex(p, i))
			if err != nil {
				return s, err
			}
			s.ServerFeatures = append(s.ServerFeatures, v)
		}
	}

	p = bsField(path, "transport")
	if s.Transport, err = bsString(j.Transport, p); err != nil {
		return s, err
	}
	switch s.Transport {
	case "", "delta", "sotw":
	default:
		return s, bsErrorf(p, "must be \"delta\" or \"sotw\", got %q", s.Transport)
	}
	return s, nil
}

func parseAuthorities(raw json.RawMessage) (map[string]*Authority, error) {
	if jsonAbsent(raw) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := bsObject(raw, "authorities", &fields); err != nil {
		return nil, err
	}
	out := make(map[string]*Authority, len(fields))
	// Sorted, so that of several bad authorities the same one is reported
	// every time.
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		path := bsKey("authorities", name)
		a := &Authority{}
		out[name] = a
		// grpc-go crashes on a null authority; take it as an empty one.
		if jsonAbsent(fields[name]) {
			a.ClientListenerResourceNameTemplate = defaultAuthorityTemplate(name)
			continue
		}
		var j authorityJSON
		if err := bsObject(fields[name], path, &j); err != nil {
			return nil, err
		}
		var err error
		p := bsField(path, "client_listener_resource_name_template")
		if a.ClientListenerResourceNameTemplate, err = bsString(j.ClientListenerResourceNameTemplate, p); err != nil {
			return nil, err
		}
		// gRFC A47: the template must name this authority, or names built
		// from it would go to another one.
		if a.ClientListenerResourceNameTemplate == "" {
			a.ClientListenerResourceNameTemplate = defaultAuthorityTemplate(name)
		} else if prefix := authorityPrefix(name); !strings.HasPrefix(a.ClientListenerResourceNameTemplate, prefix) {
			return nil, bsErrorf(p, "must start with %q, got %q", prefix, a.ClientListenerResourceNameTemplate)
		}
		if a.Servers, err = parseServers(j.XDSServers, bsField(path, "xds_servers")); err != nil {
			return nil, err
		}
		if a.DynamicParameters, err = parseParams(j.DynamicParameters, bsField(path, "dynamic_parameters")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseParams parses a TP2 "dynamic_parameters" object of string values. It
// returns nil when the field is absent and a non-nil map when it is present,
// even empty.
func parseParams(raw json.RawMessage, path string) (map[string]string, error) {
	if jsonAbsent(raw) {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := bsObject(raw, path, &fields); err != nil {
		return nil, err
	}
	params := make(map[string]string, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if kind := jsonKind(fields[k]); kind != "string" {
			return nil, bsErrorf(bsKey(path, k), "must be a string, got %s", kind)
		}
		var v string
		if err := json.Unmarshal(fields[k], &v); err != nil {
			return nil, &bootstrapError{path: bsKey(path, k), msg: err.Error(), err: err}
		}
		params[k] = v
	}
	return params, nil
}

// grpcNodeFields are the node fields grpc-go reads, with encoding/json.
var grpcNodeFields = []string{"id", "cluster", "locality", "metadata"}

// grpcNodeJSON and grpcLocalityJSON pick out the fields grpc-go reads the way
// it reads them: keys matched case-insensitively, the last duplicate winning.
type grpcNodeJSON struct {
	ID       json.RawMessage `json:"id"`
	Cluster  json.RawMessage `json:"cluster"`
	Locality json.RawMessage `json:"locality"`
	Metadata json.RawMessage `json:"metadata"`
}

type grpcLocalityJSON struct {
	Region  json.RawMessage `json:"region"`
	Zone    json.RawMessage `json:"zone"`
	SubZone json.RawMessage `json:"sub_zone"`
}

// parseNode parses "node" as proto JSON of envoy.config.core.v3.Node,
// ignoring unknown fields (grpc-java and C-core bootstraps carry some).
//
// It is decoded one field at a time. A malformed field grpc-go reads (id,
// cluster, locality, metadata) is an error, as in grpc-go. A malformed field
// grpc-go ignores, such as "user_agent_name": 5, is ignored here too, since a
// bootstrap grpc-go accepts must parse.
func parseNode(raw json.RawMessage) (*corev3.Node, error) {
	n := &corev3.Node{}
	if jsonAbsent(raw) {
		return n, nil
	}
	var fields map[string]json.RawMessage
	if err := bsObject(raw, "node", &fields); err != nil {
		return nil, err
	}
	var g grpcNodeJSON
	_ = json.Unmarshal(raw, &g) // cannot fail: an object into raw fields
	fields = canonicalKeys(fields, map[string]json.RawMessage{
		"id": g.ID, "cluster": g.Cluster, "locality": g.Locality, "metadata": g.Metadata,
	})
	if loc := fields["locality"]; jsonKind(loc) == "object" {
		var lf map[string]json.RawMessage
		var gl grpcLocalityJSON
		_ = json.Unmarshal(loc, &lf)
		_ = json.Unmarshal(loc, &gl)
		lf = canonicalKeys(lf, map[string]json.RawMessage{
			"region": gl.Region, "zone": gl.Zone, "sub_zone": gl.SubZone,
		})
		if lf["sub_zone"] != nil {
			delete(lf, "subZone") // protojson's other name for it; grpc-go reads sub_zone
		}
		fields["locality"], _ = json.Marshal(lf)
	}
	for _, k := range []string{"locality", "metadata"} {
		if v, ok := fields[k]; ok && !jsonAbsent(v) && jsonKind(v) != "object" {
			return nil, bsErrorf(bsField("node", k), "must be a JSON object, got %s", jsonKind(v))
		}
	}
	opts := protojson.UnmarshalOptions{DiscardUnknown: true}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		one, _ := json.Marshal(map[string]json.RawMessage{k: fields[k]})
		part := &corev3.Node{}
		if err := opts.Unmarshal(one, part); err != nil {
			if slices.Contains(grpcNodeFields, k) {
				return nil, &bootstrapError{path: bsField("node", k), msg: protoErrorText(err), err: err}
			}
			continue
		}
		proto.Merge(n, part)
	}
	return n, nil
}

// canonicalKeys replaces the keys of fields that equal a key of canon but for
// case with that key and canon's value (when non-nil), as encoding/json
// matches them.
func canonicalKeys(fields, canon map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(fields))
next:
	for k, v := range fields {
		for c := range canon {
			if strings.EqualFold(k, c) {
				continue next
			}
		}
		out[k] = v
	}
	for k, v := range canon {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// protoLinePos is protojson's position in the one-field document it was
// given, which would only confuse in a message about the bootstrap.
var protoLinePos = regexp.MustCompile(`\s*\(line \d+:\d+\)`)

// protoErrorText drops protojson's "proto: " prefix (which it spells with a
// space or a no-break space at random) and its position.
func protoErrorText(err error) string {
	s := strings.ReplaceAll(err.Error(), "\u00a0", " ")
	s = strings.TrimPrefix(s, "proto:")
	s = protoLinePos.ReplaceAllString(s, "")
	s = strings.TrimPrefix(strings.TrimSpace(s), ":")
	return strings.TrimSpace(s)
}

// bsObject decodes a JSON object into v (a struct or map), or says what the
// value is instead.
func bsObject(raw json.RawMessage, path string, v any) error {
	if kind := jsonKind(raw); kind != "object" {
		return bsErrorf(path, "must be a JSON object, got %s", kind)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &bootstrapError{path: path, msg: err.Error(), err: err}
	}
	return nil
}

func bsArray(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	if kind := jsonKind(raw); kind != "array" {
		return nil, bsErrorf(path, "must be a JSON array, got %s", kind)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, &bootstrapError{path: path, msg: err.Error(), err: err}
	}
	return elems, nil
}

// bsString decodes a string; absent or null is "", as with encoding/json.
func bsString(raw json.RawMessage, path string) (string, error) {
	if jsonAbsent(raw) {
		return "", nil
	}
	if kind := jsonKind(raw); kind != "string" {
		return "", bsErrorf(path, "must be a string, got %s", kind)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &bootstrapError{path: path, msg: err.Error(), err: err}
	}
	return s, nil
}

// bsBool decodes a bool; absent or null is false.
func bsBool(raw json.RawMessage, path string) (bool, error) {
	if jsonAbsent(raw) {
		return false, nil
	}
	if kind := jsonKind(raw); kind != "bool" {
		return false, bsErrorf(path, "must be true or false, got %s", kind)
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, &bootstrapError{path: path, msg: err.Error(), err: err}
	}
	return v, nil
}

// jsonAbsent reports whether a field is missing or null, which encoding/json
// (and so grpc-go) treats alike.
func jsonAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// jsonKind names the kind of a valid JSON value for error messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
