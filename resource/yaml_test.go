package resource

import (
	"fmt"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
)

const listenerYAML = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
address: {socket_address: {address: 0.0.0.0, port_value: 0777}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: y
      codec_type: AUTO
      rds: {route_config_name: "on", config_source: {ads: {}}}
      http_filters:
      - name: router
        typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`

// Plain scalars follow the YAML 1.2 core schema: y and on are text, 0777
// is the number 777 (YAML 1.1 read y as true and 0777 as octal).
func TestYAML12Scalars(t *testing.T) {
	docs, err := Decode("l.yaml", []byte(listenerYAML))
	if err != nil {
		t.Fatal(err)
	}
	l := docs[0].Message.(*listenerv3.Listener)
	if p := l.GetAddress().GetSocketAddress().GetPortValue(); p != 777 {
		t.Errorf("port_value 0777 = %d, want 777", p)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	if hcm.StatPrefix != "y" || hcm.GetRds().GetRouteConfigName() != "on" {
		t.Errorf("stat_prefix %q, route_config_name %q; want y and on", hcm.StatPrefix, hcm.GetRds().GetRouteConfigName())
	}
	for src, want := range map[string]int{"0o17": 15, "0x1F": 31, "+12": 12, "007": 7} {
		docs, err := Decode("c.yaml", []byte("\"@type\": envoy.config.cluster.v3.Cluster\nname: c\nper_connection_buffer_limit_bytes: "+src+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := docs[0].Message.(*clusterv3.Cluster).GetPerConnectionBufferLimitBytes().GetValue(); got != uint32(want) {
			t.Errorf("%s = %d, want %d", src, got, want)
		}
	}
}

// Anchors, aliases and merge keys work within a document; Envoy's
// !ignore keys hold anchors and are otherwise left out.
func TestYAMLAnchorsAndIgnore(t *testing.T) {
	src := `!ignore defaults: &eds
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}}}
  connect_timeout: 1s
name: a
resource:
  "@type": envoy.config.cluster.v3.Cluster
  <<: *eds
  connect_timeout: 2s
---
- "@type": envoy.config.cluster.v3.Cluster
  name: b
  <<: [&x {lb_policy: RING_HASH}, {lb_policy: MAGLEV, type: STATIC}]
- "@type": envoy.config.cluster.v3.Cluster
  name: c
  <<: *x
`
	docs, err := Decode("c.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3", len(docs))
	}
	a, b, c := docs[0].Message.(*clusterv3.Cluster), docs[1].Message.(*clusterv3.Cluster), docs[2].Message.(*clusterv3.Cluster)
	if a.GetType() != clusterv3.Cluster_EDS || a.GetConnectTimeout().AsDuration().Seconds() != 2 {
		t.Errorf("a = %v", a)
	}
	if b.GetLbPolicy() != clusterv3.Cluster_RING_HASH || b.GetType() != clusterv3.Cluster_STATIC || c.GetLbPolicy() != clusterv3.Cluster_RING_HASH {
		t.Errorf("b = %v, c = %v: the first merged mapping wins", b, c)
	}
}

func TestYAMLErrors(t *testing.T) {
	const cl = "\"@type\": envoy.config.cluster.v3.Cluster\nname: c\n"
	for _, tc := range []struct{ name, src, want string }{
		{"bad enum at its place", cl + "lb_policy:   FASTEST\n",
			`c.yaml:3:14: document 1: lb_policy: invalid value for enum field lbPolicy: "FASTEST"`},
		{"unknown field at its key", cl + "circuit_breakers:\n  thresholds:\n  - max_connections: 1\n    max_conections: 2\n",
			`c.yaml:6:5: document 1: circuit_breakers.thresholds[0].max_conections: unknown field "max_conections"`},
		{"validation error at its value", "\"@type\": envoy.config.route.v3.RouteConfiguration\nname: r\nvirtual_hosts:\n- name: vh\n  domains: []\n",
			`c.yaml:5:12: document 1: virtual_hosts[0].domains: value must contain at least 1 item(s)`},
		{"unknown extension type", cl + "transport_socket:\n  name: tls\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContex\n",
			`c.yaml:6:14: document 1: transport_socket.typed_config.@type: unknown type "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContex": did you mean envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext?`},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n",
			"the document expands to more than"},
		{"key tagged", cl + "!x foo: 1\n", `YAML reads !x as a tag`},
		{"bad !!int", cl + "per_connection_buffer_limit_bytes: !!int 1.5\n", `c.yaml:3:36: document 1: per_connection_buffer_limit_bytes: "1.5" is not a int`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("c.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tc.want)
			}
		})
	}
}

// TypedStruct (both packages) carries an extension by name.
func TestTypedStructAccepted(t *testing.T) {
	for _, ts := range []string{"udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct"} {
		src := strings.Replace(listenerYAML, "typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}",
			"typed_config: {\"@type\": type.googleapis.com/"+ts+", type_url: type.googleapis.com/acme.Filter, value: {x: 1}}", 1)
		if _, err := Decode("l.yaml", []byte(src)); err != nil {
			t.Errorf("%s: %v", ts, err)
		}
	}
}

// JSONToYAML keeps key order and quotes what YAML would misread; the
// decoder reads its output back to the same value.
func TestJSONToYAML(t *testing.T) {
	js := `{"name":"y","b":{"on":"on","n":"0777","x":[1,2.5,true,null,"null"]},"empty":{},"multi":"a\nb"}`
	y, err := JSONToYAML([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	want := "name: \"y\"\nb:\n  \"on\": \"on\"\n  \"n\": \"0777\"\n  x:\n    - 1\n    - 2.5\n    - true\n    - null\n    - \"null\"\nempty: {}\nmulti: |-\n  a\n  b\n"
	if string(y) != want {
		t.Errorf("got:\n%s\nwant:\n%s", y, want)
	}
	var c yamlConv
	var n yaml.Node
	if err := yaml.Unmarshal(y, &n); err != nil {
		t.Fatal(err)
	}
	c.first, c.limit = 1, 1<<20
	c.value(n.Content[0], "")
	if string(c.js) != js {
		t.Errorf("read back as %s", c.js)
	}
}

// Blank lines before a document are counted once: its errors are on the
// lines they are.
func TestYAMLBlankLinesBeforeDocument(t *testing.T) {
	const cl = "\"@type\": envoy.config.cluster.v3.Cluster\nname: a\nnope: 1\n"
	for src, want := range map[string]string{
		"\n\n" + cl:              `f.yaml:5:1: document 1: nope: unknown field "nope" (Cluster has no such field)`,
		"---\n  \n" + cl:         `f.yaml:5:1: document 1: nope: unknown field "nope" (Cluster has no such field)`,
		cl + "---\n\n\n" + cl:    "f.yaml:3:1: document 1: nope: unknown field \"nope\" (Cluster has no such field)\nf.yaml:9:1: document 2: nope: unknown field \"nope\" (Cluster has no such field)",
		"# c\n\n" + cl + "---\n": `f.yaml:5:1: document 1: nope: unknown field "nope" (Cluster has no such field)`,
	} {
		if _, err := Decode("f.yaml", []byte(src)); fmt.Sprint(err) != want {
			t.Errorf("%q:\n%v\nwant\n%s", src, err, want)
		}
	}
}
