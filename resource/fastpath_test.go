package resource

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

// The fast path (internal/pbjson) changes nothing but the speed: every
// example, every generated mesh resource and every document below decodes
// to the same variants, encodings and errors as with protojson alone.
func TestFastPathChangesNothing(t *testing.T) {
	type input struct {
		name string
		data []byte
	}
	var inputs []input
	files, err := exampleFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{f, b})
	}
	for _, gen := range []func(*bytes.Buffer, int) error{
		func(b *bytes.Buffer, n int) error { return meshgen.Clusters(b, n) },
		func(b *bytes.Buffer, n int) error { return meshgen.Mesh(b, n) },
	} {
		var buf bytes.Buffer
		if err := gen(&buf, 200); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{"mesh.json", buf.Bytes()})
	}
	for _, s := range []string{
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "connect_timeout": "1s"}`,
		`{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "name": "d"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "@type": "envoy.config.cluster.v3.Cluster", "name": "c"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "connect_timeout": "1"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "connectTimeout": "1s", "connect_timeout": "2s"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "nope": 1}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "type": "EDS"`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "lb_policy": "NOPE"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "", "load_assignment": {"cluster_name": "c"}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "metadata": {"filter_metadata": {"a": {"k": 1, "k": 2}}}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "transport_socket": {"name": "t", "typed_config": {"@type": "type.googleapis.com/nope.Nope"}}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "transport_socket": {"name": "t", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext", "sni": "x"}}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "circuit_breakers": {"thresholds": [{"max_connections": -1}]}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c", "per_connection_buffer_limit_bytes": 4294967296}`,
		`{"@type": "envoy.config.route.v3.RouteConfiguration", "name": "r", "virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "c", "timeout": "0.5s"}}]}]}`,
		`{"@type": "envoy.config.route.v3.RouteConfiguration", "name": "r", "virtual_hosts": [{"name": "v", "domains": []}]}`,
		`{"name": "c", "resource": {"@type": "envoy.config.cluster.v3.Cluster", "connect_timeout": "1s"}}`,
		`{"name": "c", "constraints": "env=prod", "resource": {"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}}`,
		`{"name": "c", "resource": {"@type": "envoy.config.cluster.v3.Cluster", "name": "d"}}`,
		"{\"@type\": \"envoy.config.cluster.v3.Cluster\", \"name\": \"\xff\"}",
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c\u00e9\n"}`,
		"\"@type\": envoy.config.cluster.v3.Cluster\nname: c\nconnect_timeout: 1s\n",
		`[{"@type": "envoy.config.cluster.v3.Cluster", "name": "a"}, {"@type": "envoy.config.cluster.v3.Cluster", "name": "a"}]`,
	} {
		inputs = append(inputs, input{"in", []byte(s)})
	}
	taken := 0
	for _, in := range inputs {
		docs, err := Decode(in.name, in.data)
		sameWithoutFastPath(t, in.name, in.data, docs, err)
		for _, d := range docs {
			if pre, _ := readBare(d.Raw); pre != nil {
				taken++
			}
		}
	}
	if taken < 400 {
		t.Errorf("the fast path took %d documents, want the 400 generated at least", taken)
	}
}

// The depth the fast path reports is duplicateKey's.
func TestFastPathDepth(t *testing.T) {
	for _, js := range []string{
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "metadata": {"filter_metadata": {"a": {"k": [1, [2, {"x": []}]]}}}}`,
		`{"@type": "envoy.config.cluster.v3.Cluster", "circuit_breakers": {"thresholds": [{}, {"max_connections": 3}]}, "name": "c"}`,
	} {
		pre, depth := readBare([]byte(js))
		if pre == nil {
			t.Fatalf("%s not taken", js)
		}
		if _, _, _, _, want := duplicateKey([]byte(js)); depth != want {
			t.Errorf("%s: depth %d, want %d", js, depth, want)
		}
	}
}

// The splitter finds documents and places errors the same whatever the
// reads it is given, for a source cut at every byte: positions are counted
// once a value's end is found, not byte by byte as it is read.
func TestSplitterPositionsAnyReads(t *testing.T) {
	src := "[\n  {\"@type\": \"envoy.config.cluster.v3.Cluster\", \"name\": \"é\\\"x\"},\n\t{\"name\": \"ü\",\n   \"resource\": {\"@type\": \"envoy.config.cluster.v3.Cluster\"}}, {\"a\": \"b\n\"},  \n 7 ]\n"
	for cut := 0; cut <= len(src); cut++ {
		in := src[:cut]
		var want string
		for i, r := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader,
			iotest.HalfReader,
			iotest.DataErrReader,
		} {
			var got []string
			err := DecodeReader("s.json", r(strings.NewReader(in)), JSON, func(d *Document) error {
				got = append(got, d.Location.String())
				return nil
			})
			s := fmt.Sprint(got, err)
			if i == 0 {
				want = s
			} else if s != want {
				t.Fatalf("cut at %d, reader %d:\n%s\nwant\n%s", cut, i, s, want)
			}
		}
	}
}

// exampleFiles lists the authoring files under examples/, in lexical
// order (resource/files lists them for programs; it imports this package).
func exampleFiles() ([]string, error) {
	var out []string
	err := filepath.WalkDir("../examples", func(p string, d fs.DirEntry, err error) error {
		switch strings.ToLower(filepath.Ext(p)) {
		case ".yaml", ".yml", ".json":
			out = append(out, p)
		}
		return err
	})
	return out, err
}
