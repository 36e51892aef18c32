package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/xdsd/xdsd/internal/servertest"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// bsServer is the smallest valid xds_servers entry.
const bsServer = `{"server_uri": "localhost:18000", "channel_creds": [{"type": "insecure"}]}`

func mustParseBootstrap(t *testing.T, data string) *Bootstrap {
	t.Helper()
	b, err := ParseBootstrap([]byte(data))
	if err != nil {
		t.Fatalf("ParseBootstrap: %v\n%s", err, data)
	}
	return b
}

// startClient starts a client of the bootstrap data with o (quiet unless
// o says otherwise), closed when the test ends.
func startClient(t *testing.T, data string, o Options) *Client {
	t.Helper()
	if o.Logger == nil {
		o.Logger = servertest.Quiet
	}
	c, err := New(mustParseBootstrap(t, data), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustLoadBootstrap(t *testing.T, name string) *Bootstrap {
	t.Helper()
	b, err := LoadBootstrap(filepath.Join("testdata", "bootstrap", name))
	if err != nil {
		t.Fatalf("LoadBootstrap: %v", err)
	}
	return b
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantServers(t *testing.T, what string, got, want []ServerConfig) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d servers %+v, want %d %+v", what, len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.URI != w.URI || g.Transport != w.Transport || !slices.Equal(g.ServerFeatures, w.ServerFeatures) ||
			!slices.EqualFunc(g.ChannelCreds, w.ChannelCreds, func(a, b ChannelCreds) bool {
				return a.Type == b.Type && canonicalEqual(a.Config, b.Config)
			}) {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

// canonicalEqual compares JSON values, ignoring formatting.
func canonicalEqual(a, b json.RawMessage) bool {
	return string(canonicalJSON(a)) == string(canonicalJSON(b))
}

// TestParseBootstrapFiles parses the bootstraps in testdata and checks every
// field survives: the docs/testing.md client bootstrap, a grpc-go style federation
// bootstrap with fields for other languages, and a TP2 one.
func TestParseBootstrapFiles(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, b *Bootstrap)
	}{
		{"interop.json", func(t *testing.T, b *Bootstrap) {
			wantServers(t, "Servers", b.Servers, []ServerConfig{{
				URI:            "localhost:18000",
				ChannelCreds:   []ChannelCreds{{Type: "insecure"}},
				ServerFeatures: []string{"xds_v3"},
			}})
			want := &corev3.Node{
				Id:       "grpc-client-1",
				Cluster:  "test-cluster",
				Locality: &corev3.Locality{Region: "us-east1", Zone: "us-east1-b", SubZone: "rack7"},
				Metadata: mustStruct(t, map[string]any{"env": "prod", "replicas": 3}),
			}
			if !proto.Equal(b.Node, want) {
				t.Errorf("Node = %v, want %v", b.Node, want)
			}
			if b.ClientDefaultListenerResourceNameTemplate != "%s" {
				t.Errorf("ClientDefaultListenerResourceNameTemplate = %q, want the default %%s", b.ClientDefaultListenerResourceNameTemplate)
			}
			if b.Authorities != nil || b.DynamicParameters != nil || b.CertificateProviders != nil || b.NodeMetadataAsParameters || b.ServerListenerResourceNameTemplate != "" {
				t.Errorf("unset fields are set: %+v", b)
			}
		}},
		{"federation.json", func(t *testing.T, b *Bootstrap) {
			wantServers(t, "Servers", b.Servers, []ServerConfig{{
				URI:            "xds.example.com:443",
				ChannelCreds:   []ChannelCreds{{Type: "google_default"}, {Type: "insecure"}},
				ServerFeatures: []string{"xds_v3", "ignore_resource_deletion"},
			}})
			want := &corev3.Node{
				Id:             "projects/123/networks/default/nodes/client-7",
				Cluster:        "prod",
				Locality:       &corev3.Locality{Zone: "us-central1-a"},
				Metadata:       mustStruct(t, map[string]any{"TRAFFICDIRECTOR_NETWORK_NAME": "default", "canary": true}),
				UserAgentName:  "gRPC Java",
				ClientFeatures: []string{"envoy.lb.does_not_support_overprovisioning"},
			}
			if !proto.Equal(b.Node, want) {
				t.Errorf("Node = %v, want %v", b.Node, want)
			}
			if got := slices.Sorted(maps.Keys(b.Authorities)); !slices.Equal(got, []string{"", "other.example.com", "xds.example.com"}) {
				t.Fatalf("Authorities = %q", got)
			}
			if got, want := b.Authorities["xds.example.com"].ClientListenerResourceNameTemplate, "xdstp://xds.example.com/envoy.config.listener.v3.Listener/%s"; got != want {
				t.Errorf("default authority template = %q, want %q", got, want)
			}
			other := b.Authorities["other.example.com"]
			if got, want := other.ClientListenerResourceNameTemplate, "xdstp://other.example.com/envoy.config.listener.v3.Listener/svc/%s"; got != want {
				t.Errorf("authority template = %q, want %q", got, want)
			}
			wantServers(t, "other.example.com servers", other.Servers, []ServerConfig{{
				URI:            "other.example.com:443",
				ChannelCreds:   []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"ca_certificate_file": "/etc/xds/ca.pem"}`)}},
				ServerFeatures: []string{"trusted_xds_server"},
			}})
			if n := len(b.Authorities[""].Servers); n != 0 {
				t.Errorf(`authorities[""] has %d servers, want none`, n)
			}
			if got, want := b.ClientDefaultListenerResourceNameTemplate, "xdstp://xds.example.com/envoy.config.listener.v3.Listener/%s"; got != want {
				t.Errorf("ClientDefaultListenerResourceNameTemplate = %q, want %q", got, want)
			}
			if got, want := b.ServerListenerResourceNameTemplate, "grpc/server?xds.resource.listening_address=%s"; got != want {
				t.Errorf("ServerListenerResourceNameTemplate = %q, want %q", got, want)
			}
			cp, ok := b.CertificateProviders["google_cloud_private_spiffe"]
			if !ok || !strings.Contains(string(cp), `"plugin_name": "file_watcher"`) || !strings.Contains(string(cp), `"refresh_interval": "600s"`) {
				t.Errorf("CertificateProviders = %s", cp)
			}
		}},
		{"tp2.json", func(t *testing.T, b *Bootstrap) {
			wantServers(t, "Servers", b.Servers, []ServerConfig{{
				URI: "localhost:18000", ChannelCreds: []ChannelCreds{{Type: "insecure"}}, Transport: "sotw",
			}})
			if !maps.Equal(b.DynamicParameters, map[string]string{"env": "staging"}) {
				t.Errorf("DynamicParameters = %v", b.DynamicParameters)
			}
			if !b.NodeMetadataAsParameters {
				t.Error("NodeMetadataAsParameters = false")
			}
			a := b.Authorities["xds.example.com"]
			if !maps.Equal(a.DynamicParameters, map[string]string{"env": "prod", "version": "v2"}) {
				t.Errorf("authority DynamicParameters = %v", a.DynamicParameters)
			}
			wantServers(t, "authority servers", a.Servers, []ServerConfig{{
				URI: "xds.example.com:443", ChannelCreds: []ChannelCreds{{Type: "insecure"}}, Transport: "delta",
			}})
			if p := b.Authorities["plain.example.com"].DynamicParameters; p != nil {
				t.Errorf("authority without dynamic_parameters has %v", p)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tt.check(t, mustLoadBootstrap(t, tt.file))
		})
	}
}

// TestParseBootstrapLikeGRPCGo holds bootstraps grpc-go accepts that a
// stricter parser might not: other languages' fields, encoding/json's
// case-insensitive keys and duplicates, nulls, and malformed fields grpc-go
// never reads. All must parse.
func TestParseBootstrapLikeGRPCGo(t *testing.T) {
	tests := []struct {
		name  string
		json  string
		check func(t *testing.T, b *Bootstrap)
	}{{
		name: "unknown fields everywhere",
		json: `{
			"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure", "config": {}, "extra": 1}],
			                 "server_features": ["xds_v3", "some_future_feature"], "extra": [true]}],
			"node": {"id": "n", "user_agent_version": "1.2", "future_field": {"x": 1}, "locality": {"zone": "z", "extra": 2}},
			"authorities": {"a.example": {"extra": "x"}},
			"future": null
		}`,
		check: func(t *testing.T, b *Bootstrap) {
			want := &corev3.Node{Id: "n", Locality: &corev3.Locality{Zone: "z"},
				UserAgentVersionType: &corev3.Node_UserAgentVersion{UserAgentVersion: "1.2"}}
			if !proto.Equal(b.Node, want) {
				t.Errorf("Node = %v, want %v", b.Node, want)
			}
			if got := b.Servers[0].ServerFeatures; !slices.Equal(got, []string{"xds_v3", "some_future_feature"}) {
				t.Errorf("ServerFeatures = %q", got)
			}
			if got := string(b.Servers[0].ChannelCreds[0].Config); got != "{}" {
				t.Errorf("Config = %s", got)
			}
		},
	}, {
		name: "keys matched case-insensitively, as encoding/json does",
		json: `{"XDS_Servers": [{"Server_URI": "a:1", "Channel_Creds": [{"Type": "insecure"}]}],
		        "Node": {"ID": "n", "Cluster": "c", "Locality": {"Region": "r", "SUB_ZONE": "s"}, "METADATA": {"k": "v"}}}`,
		check: func(t *testing.T, b *Bootstrap) {
			want := &corev3.Node{Id: "n", Cluster: "c", Locality: &corev3.Locality{Region: "r", SubZone: "s"},
				Metadata: mustStruct(t, map[string]any{"k": "v"})}
			if !proto.Equal(b.Node, want) {
				t.Errorf("Node = %v, want %v", b.Node, want)
			}
			if b.Servers[0].URI != "a:1" {
				t.Errorf("URI = %q", b.Servers[0].URI)
			}
		},
	}, {
		name: "duplicate keys: the last wins",
		json: `{"xds_servers": [` + bsServer + `], "node": {"id": "first", "Id": "second", "cluster": "a", "cluster": "b"}}`,
		check: func(t *testing.T, b *Bootstrap) {
			if b.Node.GetId() != "second" || b.Node.GetCluster() != "b" {
				t.Errorf("Node = %v", b.Node)
			}
		},
	}, {
		name: "nulls are absent fields",
		json: `{"xds_servers": [` + bsServer + `, null], "node": null, "authorities": null, "certificate_providers": null,
		        "client_default_listener_resource_name_template": null, "dynamic_parameters": null,
		        "node_metadata_as_dynamic_parameters": null}`,
		check: func(t *testing.T, b *Bootstrap) {
			if len(b.Servers) != 1 || b.Node == nil || b.Authorities != nil || b.DynamicParameters != nil ||
				b.ClientDefaultListenerResourceNameTemplate != "%s" {
				t.Errorf("got %+v", b)
			}
		},
	}, {
		name: "null fields inside servers and authorities",
		json: `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [null, {"type": "insecure", "config": null}],
		        "server_features": null, "transport": null}],
		        "authorities": {"a": null, "b": {"xds_servers": null, "client_listener_resource_name_template": null}}}`,
		check: func(t *testing.T, b *Bootstrap) {
			wantServers(t, "Servers", b.Servers, []ServerConfig{{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "insecure"}}}})
			if b.Servers[0].ChannelCreds[0].Config != nil {
				t.Errorf("null config kept: %s", b.Servers[0].ChannelCreds[0].Config)
			}
			for _, name := range []string{"a", "b"} {
				a := b.Authorities[name]
				if a == nil || a.ClientListenerResourceNameTemplate != "xdstp://"+name+"/envoy.config.listener.v3.Listener/%s" || a.Servers != nil {
					t.Errorf("authority %q = %+v", name, a)
				}
			}
		},
	}, {
		name: "malformed node fields grpc-go does not read are ignored",
		json: `{"xds_servers": [` + bsServer + `], "node": {"id": "n", "user_agent_name": 5, "client_features": "one", "extensions": {}}}`,
		check: func(t *testing.T, b *Bootstrap) {
			if !proto.Equal(b.Node, &corev3.Node{Id: "n"}) {
				t.Errorf("Node = %v", b.Node)
			}
		},
	}, {
		name: "node fields in proto JSON camelCase",
		json: `{"xds_servers": [` + bsServer + `], "node": {"userAgentName": "xdsd", "clientFeatures": ["f"], "locality": {"subZone": "s"}}}`,
		check: func(t *testing.T, b *Bootstrap) {
			want := &corev3.Node{UserAgentName: "xdsd", ClientFeatures: []string{"f"}, Locality: &corev3.Locality{SubZone: "s"}}
			if !proto.Equal(b.Node, want) {
				t.Errorf("Node = %v, want %v", b.Node, want)
			}
		},
	}, {
		name: "empty authority name and an escaped one",
		json: `{"xds_servers": [` + bsServer + `], "authorities": {
			"": {"client_listener_resource_name_template": "xdstp:///envoy.config.listener.v3.Listener/%s"},
			"a b": {"client_listener_resource_name_template": "xdstp://a%20b/envoy.config.listener.v3.Listener/%s"}}}`,
		check: func(t *testing.T, b *Bootstrap) {
			if got := b.Authorities["a b"].ClientListenerResourceNameTemplate; got != "xdstp://a%20b/envoy.config.listener.v3.Listener/%s" {
				t.Errorf("template = %q", got)
			}
		},
	}, {
		name: "no node",
		json: `{"xds_servers": [` + bsServer + `]}`,
		check: func(t *testing.T, b *Bootstrap) {
			if b.Node == nil || !proto.Equal(b.Node, &corev3.Node{}) {
				t.Errorf("Node = %v, want empty", b.Node)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustParseBootstrap(t, tt.json))
		})
	}
}

func TestParseBootstrapErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		path string // the field path the message must start with ("" for the document)
		msg  string // a part of the rest of the message
	}{
		{"invalid JSON", `{"xds_servers": [`, "", "invalid JSON"},
		{"not an object", `[]`, "", "must be a JSON object, got array"},
		{"null document", `null`, "", "must be a JSON object, got null"},
		{"missing xds_servers", `{"node": {"id": "n"}}`, "xds_servers", "missing"},
		{"null xds_servers", `{"xds_servers": null}`, "xds_servers", "missing"},
		{"empty xds_servers", `{"xds_servers": []}`, "xds_servers", "at least one server"},
		{"xds_servers not a list", `{"xds_servers": {}}`, "xds_servers", "must be a JSON array, got object"},
		{"server not an object", `{"xds_servers": ["a:1"]}`, "xds_servers[0]", "must be a JSON object, got string"},
		{"missing server_uri", `{"xds_servers": [` + bsServer + `, {"channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[1].server_uri", "missing"},
		{"empty server_uri", `{"xds_servers": [{"server_uri": "", "channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[0].server_uri", "empty"},
		{"server_uri not a string", `{"xds_servers": [{"server_uri": 5, "channel_creds": [{"type": "insecure"}]}]}`,
			"xds_servers[0].server_uri", "must be a string, got number"},
		{"missing channel_creds", `{"xds_servers": [{"server_uri": "a:1"}]}`, "xds_servers[0].channel_creds", "missing"},
		{"empty channel_creds", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": []}]}`,
			"xds_servers[0].channel_creds", "at least one"},
		{"only null channel_creds", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [null]}]}`,
			"xds_servers[0].channel_creds", "at least one"},
		{"channel_creds without type", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}, {"config": {}}]}]}`,
			"xds_servers[0].channel_creds[1].type", "missing"},
		{"channel_creds type not a string", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": true}]}]}`,
			"xds_servers[0].channel_creds[0].type", "must be a string, got bool"},
		{"only unsupported channel_creds", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "bogus"}, {"type": "google_default"}]}]}`,
			"xds_servers[0].channel_creds", `server "a:1": no supported channel_creds type in ["bogus" "google_default"] (supported: ["insecure" "tls"])`},
		{"unsupported channel_creds of an authority's server", `{"xds_servers": [` + bsServer + `], "authorities": {"a.example": {"xds_servers": [` + bsServer + `, {"server_uri": "b:1", "channel_creds": [{"type": "alts"}]}]}}}`,
			`authorities["a.example"].xds_servers[1].channel_creds`, `server "b:1": no supported channel_creds type in ["alts"]`},
		{"tls channel_creds with a certificate and no key", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "bogus"}, {"type": "tls", "config": {"certificate_file": "c.pem"}}, {"type": "insecure"}]}]}`,
			"xds_servers[0].channel_creds[1]", `server "a:1": tls: config: certificate_file and private_key_file must be given together`},
		{"tls channel_creds config not an object", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "tls", "config": 5}]}]}`,
			"xds_servers[0].channel_creds[0]", `server "a:1": tls: config:`},
		{"server_features not strings", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}], "server_features": ["a", 1]}]}`,
			"xds_servers[0].server_features[1]", "must be a string, got number"},
		{"unknown transport", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}], "transport": "incremental"}]}`,
			"xds_servers[0].transport", `must be "delta" or "sotw", got "incremental"`},
		{"transport not a string", `{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}], "transport": 1}]}`,
			"xds_servers[0].transport", "must be a string"},
		{"node not an object", `{"xds_servers": [` + bsServer + `], "node": "n"}`, "node", "must be a JSON object, got string"},
		{"node id wrong type", `{"xds_servers": [` + bsServer + `], "node": {"id": 5}}`, "node.id", "invalid value for string field id"},
		{"node ID wrong type, any case", `{"xds_servers": [` + bsServer + `], "node": {"ID": 5}}`, "node.id", "invalid value"},
		{"node cluster wrong type", `{"xds_servers": [` + bsServer + `], "node": {"cluster": ["c"]}}`, "node.cluster", "invalid value"},
		{"node locality not an object", `{"xds_servers": [` + bsServer + `], "node": {"locality": "us"}}`,
			"node.locality", "must be a JSON object, got string"},
		{"node locality zone wrong type", `{"xds_servers": [` + bsServer + `], "node": {"locality": {"zone": 1}}}`,
			"node.locality", "zone"},
		{"node metadata not an object", `{"xds_servers": [` + bsServer + `], "node": {"metadata": [1]}}`,
			"node.metadata", "must be a JSON object, got array"},
		{"top-level dynamic_parameters value not a string", `{"xds_servers": [` + bsServer + `], "dynamic_parameters": {"env": "prod", "shard": 3}}`,
			`dynamic_parameters["shard"]`, "must be a string, got number"},
		{"top-level dynamic_parameters not an object", `{"xds_servers": [` + bsServer + `], "dynamic_parameters": ["env=prod"]}`,
			"dynamic_parameters", "must be a JSON object, got array"},
		{"authority dynamic_parameters value not a string", `{"xds_servers": [` + bsServer + `], "authorities": {"a.example": {"dynamic_parameters": {"canary": true}}}}`,
			`authorities["a.example"].dynamic_parameters["canary"]`, "must be a string, got bool"},
		{"node_metadata_as_dynamic_parameters not a bool", `{"xds_servers": [` + bsServer + `], "node_metadata_as_dynamic_parameters": "yes"}`,
			"node_metadata_as_dynamic_parameters", "must be true or false, got string"},
		{"authorities not an object", `{"xds_servers": [` + bsServer + `], "authorities": ["a"]}`, "authorities", "must be a JSON object, got array"},
		{"authority not an object", `{"xds_servers": [` + bsServer + `], "authorities": {"a": 1}}`, `authorities["a"]`, "must be a JSON object, got number"},
		{"authority template of another authority", `{"xds_servers": [` + bsServer + `], "authorities": {"a.example": {"client_listener_resource_name_template": "xdstp://b.example/envoy.config.listener.v3.Listener/%s"}}}`,
			`authorities["a.example"].client_listener_resource_name_template`, `must start with "xdstp://a.example/"`},
		{"authority template not xdstp", `{"xds_servers": [` + bsServer + `], "authorities": {"a.example": {"client_listener_resource_name_template": "%s"}}}`,
			`authorities["a.example"].client_listener_resource_name_template`, `must start with "xdstp://a.example/"`},
		{"authority template extending the authority name", `{"xds_servers": [` + bsServer + `], "authorities": {"a.example": {"client_listener_resource_name_template": "xdstp://a.example.org/envoy.config.listener.v3.Listener/%s"}}}`,
			`authorities["a.example"].client_listener_resource_name_template`, `must start with "xdstp://a.example/"`},
		{"authority template not a string", `{"xds_servers": [` + bsServer + `], "authorities": {"a": {"client_listener_resource_name_template": 1}}}`,
			`authorities["a"].client_listener_resource_name_template`, "must be a string"},
		{"bad authority server", `{"xds_servers": [` + bsServer + `], "authorities": {"a": {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{}]}]}}}`,
			`authorities["a"].xds_servers[0].channel_creds[0].type`, "missing"},
		{"client_default_listener_resource_name_template not a string", `{"xds_servers": [` + bsServer + `], "client_default_listener_resource_name_template": 1}`,
			"client_default_listener_resource_name_template", "must be a string"},
		{"server_listener_resource_name_template not a string", `{"xds_servers": [` + bsServer + `], "server_listener_resource_name_template": {}}`,
			"server_listener_resource_name_template", "must be a string"},
		{"certificate_providers not an object", `{"xds_servers": [` + bsServer + `], "certificate_providers": []}`,
			"certificate_providers", "must be a JSON object, got array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ParseBootstrap([]byte(tt.json))
			if err == nil {
				t.Fatalf("ParseBootstrap succeeded: %+v", b)
			}
			prefix := "bootstrap: "
			if tt.path != "" {
				prefix += tt.path + ": "
			}
			got := err.Error()
			if !strings.HasPrefix(got, prefix) || !strings.Contains(strings.TrimPrefix(got, prefix), tt.msg) {
				t.Errorf("error = %q\nwant %q followed by something with %q", got, prefix, tt.msg)
			}
		})
	}
}

func TestLoadBootstrapErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"xds_servers": [{"server_uri": ""}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadBootstrap(bad)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "xds_servers[0].server_uri: empty") {
		t.Errorf("LoadBootstrap(bad) error = %v, want it to name the file and the field", err)
	}
	missing := filepath.Join(dir, "missing.json")
	_, err = LoadBootstrap(missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadBootstrap(missing) error = %v, want a not-exist error naming the file", err)
	}
}

func TestBootstrapFromEnv(t *testing.T) {
	file := filepath.Join("testdata", "bootstrap", "interop.json")
	config := `{"xds_servers": [{"server_uri": "from-config:1", "channel_creds": [{"type": "insecure"}]}]}`
	tests := []struct {
		name          string
		file, config  string
		wantURI       string
		wantErrSubstr string
	}{
		{name: "GRPC_XDS_BOOTSTRAP", file: file, wantURI: "localhost:18000"},
		{name: "GRPC_XDS_BOOTSTRAP_CONFIG", config: config, wantURI: "from-config:1"},
		{name: "both: the file wins, as in gRPC", file: file, config: config, wantURI: "localhost:18000"},
		{name: "neither", wantErrSubstr: "neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set"},
		{name: "bad config names the variable", config: `{}`, wantErrSubstr: "GRPC_XDS_BOOTSTRAP_CONFIG: xds_servers: missing"},
		{name: "missing file", file: filepath.Join(t.TempDir(), "nope.json"), wantErrSubstr: "nope.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GRPC_XDS_BOOTSTRAP", tt.file)
			t.Setenv("GRPC_XDS_BOOTSTRAP_CONFIG", tt.config)
			b, err := BootstrapFromEnv()
			if tt.wantErrSubstr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrSubstr) {
					t.Fatalf("BootstrapFromEnv() error = %v, want %q", err, tt.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatalf("BootstrapFromEnv: %v", err)
			}
			if b.Servers[0].URI != tt.wantURI {
				t.Errorf("server = %q, want %q", b.Servers[0].URI, tt.wantURI)
			}
		})
	}
}

func TestParamsFor(t *testing.T) {
	const servers = `"xds_servers": [` + bsServer + `]`
	const metadata = `"node": {"metadata": {"env": "meta", "zone": "z1", "replicas": 3, "canary": true, "labels": {"team": "a"}, "list": ["x"], "none": null}}`
	tests := []struct {
		name      string
		json      string
		authority string
		legacy    bool
		want      map[string]string // nil: nothing to send
	}{
		{"legacy name: top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}}`, "", true,
			map[string]string{"env": "prod"}},
		{"legacy name ignores authorities", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"": {"dynamic_parameters": {"env": "other"}}}}`, "", true,
			map[string]string{"env": "prod"}},
		{"xdstp name: the authority's own", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {"dynamic_parameters": {"env": "canary", "v": "2"}}}}`, "a.example", false,
			map[string]string{"env": "canary", "v": "2"}},
		{"xdstp name: authority without falls back to top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {}}}`, "a.example", false,
			map[string]string{"env": "prod"}},
		{"xdstp name: empty authority name", `{` + servers + `, "authorities": {"": {"dynamic_parameters": {"k": "v"}}}}`, "", false,
			map[string]string{"k": "v"}},
		{"xdstp name: unknown authority falls back to top-level", `{` + servers + `, "dynamic_parameters": {"env": "prod"}}`, "nowhere", false,
			map[string]string{"env": "prod"}},
		{"xdstp name: explicit empty authority parameters send none", `{` + servers + `, "dynamic_parameters": {"env": "prod"}, "authorities": {"a.example": {"dynamic_parameters": {}}}}`, "a.example", false,
			nil},
		{"nothing configured", `{` + servers + `, ` + metadata + `}`, "", true, nil},
		{"node metadata: string fields only (legacy)", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true}`, "", true,
			map[string]string{"env": "meta", "zone": "z1"}},
		{"node metadata: string fields only (xdstp)", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "authorities": {"a.example": {}}}`, "a.example", false,
			map[string]string{"env": "meta", "zone": "z1"}},
		{"node metadata loses to configured parameters", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "dynamic_parameters": {"env": "prod"}}`, "", true,
			map[string]string{"env": "prod"}},
		{"node metadata loses to an explicit empty map", `{` + servers + `, ` + metadata + `, "node_metadata_as_dynamic_parameters": true, "dynamic_parameters": {}}`, "", true,
			nil},
		{"node metadata without string fields", `{` + servers + `, "node": {"metadata": {"n": 1}}, "node_metadata_as_dynamic_parameters": true}`, "", true,
			nil},
		{"node metadata without a node", `{` + servers + `, "node_metadata_as_dynamic_parameters": true}`, "", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParseBootstrap(t, tt.json)
			got, ok := b.ParamsFor(tt.authority, tt.legacy)
			if ok != (tt.want != nil) || !maps.Equal(got, tt.want) {
				t.Fatalf("ParamsFor(%q, %v) = %v, %v; want %v, %v", tt.authority, tt.legacy, got, ok, tt.want, tt.want != nil)
			}
			if ok {
				// The result is a copy: changing it must not change the bootstrap.
				got["injected"] = "x"
				if again, _ := b.ParamsFor(tt.authority, tt.legacy); again["injected"] != "" {
					t.Error("ParamsFor returned the bootstrap's own map")
				}
			}
		})
	}
}

func TestServersFor(t *testing.T) {
	b := mustLoadBootstrap(t, "federation.json")
	top := b.Servers
	tests := []struct {
		name      string
		authority string
		legacy    bool
		want      []ServerConfig
		wantErr   string
	}{
		{name: "legacy name: top-level", authority: "", legacy: true, want: top},
		{name: "legacy name ignores the authority", authority: "other.example.com", legacy: true, want: top},
		{name: "authority with servers", authority: "other.example.com", want: b.Authorities["other.example.com"].Servers},
		{name: "authority without servers falls back", authority: "xds.example.com", want: top},
		{name: "empty authority name with empty xds_servers falls back", authority: "", want: top},
		{name: "unknown authority (A47)", authority: "nowhere.example.com", wantErr: `authority "nowhere.example.com" is not in "authorities"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.ServersFor(tt.authority, tt.legacy)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ServersFor error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantServers(t, "ServersFor", got, tt.want)
		})
	}
	noAuth := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`]}`)
	if _, err := noAuth.ServersFor("", false); err == nil {
		t.Error(`ServersFor("", false) without "authorities" succeeded; xdstp:/// names need authorities[""]`)
	}
}

func TestListenerName(t *testing.T) {
	b := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {
		"plain.example": {},
		"own.example": {"client_listener_resource_name_template": "xdstp://own.example/envoy.config.listener.v3.Listener/grpc/client/%s?ctx=1"},
		"fixed.example": {"client_listener_resource_name_template": "xdstp://fixed.example/envoy.config.listener.v3.Listener/one"},
		"a b": {}
	}}`)
	xdstpDefault := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`],
		"client_default_listener_resource_name_template": "xdstp://plain.example/envoy.config.listener.v3.Listener/%s",
		"authorities": {"plain.example": {}}}`)
	legacyTemplate := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`],
		"client_default_listener_resource_name_template": "listeners/%s"}`)
	tests := []struct {
		name               string
		b                  *Bootstrap
		authority, service string
		want               string
		wantErr            string
	}{
		{name: "default template %s", b: b, service: "svc", want: "svc"},
		{name: "default template keeps the service verbatim", b: b, service: "a b/c?d", want: "a b/c?d"},
		{name: "legacy default template", b: legacyTemplate, service: "a b", want: "listeners/a b"},
		{name: "xdstp default template encodes", b: xdstpDefault, service: "a b/c",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/a%20b/c"},
		{name: "authority with the default template", b: b, authority: "plain.example", service: "svc",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/svc"},
		{name: "authority percent-encodes the service, keeping /", b: b, authority: "plain.example", service: "a b/c",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/a%20b/c"},
		{name: "percent-encoding of ? and %", b: b, authority: "plain.example", service: "q?x=1%",
			want: "xdstp://plain.example/envoy.config.listener.v3.Listener/q%3Fx=1%25"},
		{name: "authority with its own template", b: b, authority: "own.example", service: "a b/c",
			want: "xdstp://own.example/envoy.config.listener.v3.Listener/grpc/client/a%20b/c?ctx=1"},
		{name: "template without %s", b: b, authority: "fixed.example", service: "svc",
			want: "xdstp://fixed.example/envoy.config.listener.v3.Listener/one"},
		{name: "authority name is escaped in the default template", b: b, authority: "a b", service: "svc",
			want: "xdstp://a%20b/envoy.config.listener.v3.Listener/svc"},
		{name: "unknown authority", b: b, authority: "nowhere.example", service: "svc", wantErr: `authority "nowhere.example" is not in "authorities"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.b.ListenerName(tt.authority, tt.service)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ListenerName error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ListenerName(%q, %q) = %q, %v; want %q", tt.authority, tt.service, got, err, tt.want)
			}
		})
	}
}

func TestServerConfigDeltaAndKey(t *testing.T) {
	insecureCreds := []ChannelCreds{{Type: "insecure"}}
	base := ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"xds_v3", "ignore_resource_deletion"}}
	for _, tt := range []struct {
		transport string
		delta     bool
	}{{"", true}, {"delta", true}, {"sotw", false}} {
		s := base
		s.Transport = tt.transport
		if s.Delta() != tt.delta {
			t.Errorf("Transport %q: Delta() = %v, want %v", tt.transport, s.Delta(), tt.delta)
		}
	}

	tests := []struct {
		name string
		s    ServerConfig
		same bool // shares base's key
	}{
		{"identical", base, true},
		{"explicit delta", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures, Transport: "delta"}, true},
		{"features reordered", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"ignore_resource_deletion", "xds_v3"}}, true},
		{"other URI", ServerConfig{URI: "b:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures}, false},
		{"other creds", ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls"}}, ServerFeatures: base.ServerFeatures}, false},
		{"other features", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: []string{"xds_v3"}}, false},
		{"sotw", ServerConfig{URI: "a:1", ChannelCreds: insecureCreds, ServerFeatures: base.ServerFeatures, Transport: "sotw"}, false},
	}
	for _, tt := range tests {
		if got := tt.s.Key() == base.Key(); got != tt.same {
			t.Errorf("%s: same key = %v, want %v\n%s\n%s", tt.name, got, tt.same, tt.s.Key(), base.Key())
		}
	}

	a := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"ca_certificate_file": "/ca", "certificate_file": "/c"}`)}}}
	b := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"certificate_file":"/c","ca_certificate_file":"/ca"}`)}}}
	c := ServerConfig{URI: "a:1", ChannelCreds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{"ca_certificate_file": "/other"}`)}}}
	if a.Key() != b.Key() {
		t.Errorf("configs differing in format only have different keys:\n%s\n%s", a.Key(), b.Key())
	}
	if a.Key() == c.Key() {
		t.Error("different configs share a key")
	}

	// Two authorities in a bootstrap naming the same server share a key.
	fed := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {
		"a": {"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}], "server_features": ["b", "a"]}]},
		"b": {"xds_servers": [{"server_uri": "x:1", "channel_creds": [{"type": "insecure"}], "server_features": ["a", "b"]}]}}}`)
	if ka, kb := fed.Authorities["a"].Servers[0].Key(), fed.Authorities["b"].Servers[0].Key(); ka != kb {
		t.Errorf("same server, different keys:\n%s\n%s", ka, kb)
	}
}

// testPKI is a CA with a server and a client certificate, as PEM files.
type testPKI struct {
	dir                    string
	caFile                 string
	clientCert, clientKey  string
	serverCert             tls.Certificate
	caPool                 *x509.CertPool
	otherCAFile, emptyFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir}
	writePEM := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	newCert := func(tmpl, parent *x509.Certificate, pub, signer any) ([]byte, *x509.Certificate) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(time.Hour)
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return der, cert
	}
	newCA := func(name string) ([]byte, *x509.Certificate, *ecdsa.PrivateKey) {
		k := newKey()
		der, cert := newCert(&x509.Certificate{
			Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}, nil, &k.PublicKey, k)
		return der, cert, k
	}

	caDER, ca, caKey := newCA("xdsd test CA")
	p.caFile = writePEM("ca.pem", "CERTIFICATE", caDER)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(ca)
	otherDER, _, _ := newCA("another CA")
	p.otherCAFile = writePEM("other-ca.pem", "CERTIFICATE", otherDER)

	sk := newKey()
	serverDER, _ := newCert(&x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &sk.PublicKey, caKey)
	p.serverCert = tls.Certificate{Certificate: [][]byte{serverDER}, PrivateKey: sk}

	ck := newKey()
	clientDER, _ := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "xds-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &ck.PublicKey, caKey)
	p.clientCert = writePEM("client.pem", "CERTIFICATE", clientDER)
	ckDER, err := x509.MarshalPKCS8PrivateKey(ck)
	if err != nil {
		t.Fatal(err)
	}
	p.clientKey = writePEM("client-key.pem", "PRIVATE KEY", ckDER)

	p.emptyFile = filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(p.emptyFile, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// handshake runs a TLS handshake between creds and a server that requires
// a client certificate from the test CA, and returns both sides' errors.
func (p *testPKI) handshake(t *testing.T, creds credentials.TransportCredentials) (clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		srv := tls.Server(conn, &tls.Config{
			Certificates: []tls.Certificate{p.serverCert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    p.caPool,
			NextProtos:   []string{"h2"}, // gRPC clients insist on ALPN h2
		})
		err = srv.Handshake()
		if err == nil {
			// A TLS 1.3 client finishes before the server has checked its
			// certificate; a read makes the server's verdict reach it.
			_, err = srv.Write([]byte{1})
		}
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, _, clientErr := creds.ClientHandshake(ctx, "localhost", raw)
	if clientErr == nil {
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, clientErr = conn.Read(make([]byte, 1))
		conn.Close()
	} else {
		raw.Close()
	}
	select {
	case serverErr = <-done:
	case <-ctx.Done():
		t.Fatal("server handshake did not finish")
	}
	return clientErr, serverErr
}

func TestTransportCredentials(t *testing.T) {
	p := newTestPKI(t)
	tlsConfig := func(fields map[string]string) json.RawMessage {
		out, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	mtls := tlsConfig(map[string]string{"ca_certificate_file": p.caFile, "certificate_file": p.clientCert, "private_key_file": p.clientKey})
	tests := []struct {
		name     string
		creds    []ChannelCreds
		protocol string // SecurityProtocol of the result; "" when an error is wanted
		wantErr  string
		// handshake against the test server (which wants a client certificate)
		handshake     bool
		handshakeFail bool
	}{
		{name: "insecure", creds: []ChannelCreds{{Type: "insecure"}}, protocol: "insecure"},
		{name: "unsupported types are skipped", creds: []ChannelCreds{{Type: "google_default"}, {Type: "insecure"}}, protocol: "insecure"},
		{name: "the first supported wins", creds: []ChannelCreds{{Type: "tls"}, {Type: "insecure"}}, protocol: "tls"},
		{name: "tls with system roots", creds: []ChannelCreds{{Type: "tls"}}, protocol: "tls"},
		{name: "tls with an empty config", creds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`{}`)}}, protocol: "tls"},
		{name: "mTLS from files", creds: []ChannelCreds{{Type: "tls", Config: mtls}}, protocol: "tls", handshake: true},
		{name: "tls without a client certificate is refused by an mTLS server",
			creds:    []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.caFile})}},
			protocol: "tls", handshake: true, handshakeFail: true},
		{name: "tls with the wrong CA does not trust the server",
			creds:    []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.otherCAFile, "certificate_file": p.clientCert, "private_key_file": p.clientKey})}},
			protocol: "tls", handshake: true, handshakeFail: true},
		{name: "only unsupported types", creds: []ChannelCreds{{Type: "google_default"}, {Type: "alts"}},
			wantErr: `no supported channel_creds type in ["google_default" "alts"]`},
		{name: "no creds", wantErr: "no supported channel_creds type"},
		{name: "certificate without key",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"certificate_file": p.clientCert})}},
			wantErr: "channel_creds[0] (tls): config: certificate_file and private_key_file must be given together"},
		{name: "missing CA file",
			creds:   []ChannelCreds{{Type: "insecure-ish"}, {Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": filepath.Join(p.dir, "nope.pem")})}},
			wantErr: "channel_creds[1] (tls): ca_certificate_file:"},
		{name: "CA file without certificates",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"ca_certificate_file": p.emptyFile})}},
			wantErr: "no PEM certificate"},
		{name: "bad key file",
			creds:   []ChannelCreds{{Type: "tls", Config: tlsConfig(map[string]string{"certificate_file": p.clientCert, "private_key_file": p.emptyFile})}},
			wantErr: "certificate_file/private_key_file:"},
		{name: "config not an object", creds: []ChannelCreds{{Type: "tls", Config: json.RawMessage(`"x"`)}}, wantErr: "(tls): config:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ServerConfig{URI: "xds.example.com:443", ChannelCreds: tt.creds}
			creds, err := s.TransportCredentials()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), s.URI) {
					t.Fatalf("TransportCredentials() error = %v, want %q naming the server", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("TransportCredentials: %v", err)
			}
			if got := creds.Info().SecurityProtocol; got != tt.protocol {
				t.Errorf("SecurityProtocol = %q, want %q", got, tt.protocol)
			}
			if !tt.handshake {
				return
			}
			clientErr, serverErr := p.handshake(t, creds)
			if failed := clientErr != nil || serverErr != nil; failed != tt.handshakeFail {
				t.Errorf("handshake: client error %v, server error %v; want failure %v", clientErr, serverErr, tt.handshakeFail)
			}
		})
	}
}

func TestCheckCredentials(t *testing.T) {
	ok := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {"a": {"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "tls"}]}]}}}`)
	if err := ok.CheckCredentials(); err != nil {
		t.Errorf("CheckCredentials: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "ca.pem")
	bad := mustParseBootstrap(t, `{"xds_servers": [`+bsServer+`], "authorities": {"a": {}, "b": {"xds_servers": [`+bsServer+`,
		{"server_uri": "b:1", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "`+missing+`"}}]}]}}}`)
	err := bad.CheckCredentials()
	want := `bootstrap: authorities["b"].xds_servers[1]: server "b:1": channel_creds[0] (tls): ca_certificate_file: `
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("CheckCredentials() = %v, want %q...", err, want)
	}
}
