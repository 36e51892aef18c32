package clientdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/protojsonerr"
)

// Parsing a bootstrap.
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
				return nil, &bootstrapError{path: bsField("node", k), msg: protoErrorText(one, err), err: err}
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

// protoErrorText says why protojson rejected one, a Node of one field,
// from its structure (protojsonerr) rather than from protojson's text,
// whose position means nothing in the bootstrap and whose "proto:" prefix
// protobuf-go spells at random.
func protoErrorText(one []byte, err error) string {
	e := protojsonerr.Explain(one, (&corev3.Node{}).ProtoReflect().Descriptor(), protojsonerr.Options{DiscardUnknown: true})
	if e == nil {
		return fmt.Sprintf("not an envoy.config.core.v3.Node field (%v)", err)
	}
	return e.Msg
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
