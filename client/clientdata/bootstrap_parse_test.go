package clientdata

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
)

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
