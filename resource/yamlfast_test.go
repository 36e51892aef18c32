package resource

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

// nodeDocs reads a chunk through the nodes, as it was read before the
// fast path: its documents' JSON, marks and places, and whether it had
// problems.
func nodeDocs(c yamlChunk) (docs []fastDoc, bad bool) {
	s := yamlSource{source: "t"}
	s.reparsed = new(atomic.Int32)
	s.nodes(c, skipSpace(c.text, 0), func(t *docText) {
		docs = append(docs, fastDoc{js: t.js, marks: t.pos.(yamlPositions), line: t.loc.Line, col: t.loc.Column})
	}, func(ErrorList) { bad = true })
	return docs, bad
}

// checkFastChunk compares the fast path with the nodes on one chunk: what
// the fast path takes, the nodes read without a problem, to the same
// JSON, marks and places. It reports whether the fast path took it.
func checkFastChunk(t *testing.T, name string, c yamlChunk) bool {
	t.Helper()
	fast, ok := yamlFast(c)
	if !ok {
		return false
	}
	slow, bad := nodeDocs(c)
	if bad {
		t.Errorf("%s: the fast path took a chunk the nodes refuse:\n%s", name, c.text)
		return true
	}
	if len(fast) != len(slow) {
		t.Errorf("%s: %d documents, the nodes %d:\n%s", name, len(fast), len(slow), c.text)
		return true
	}
	for i := range fast {
		f, s := fast[i], slow[i]
		if !bytes.Equal(f.js, s.js) {
			t.Errorf("%s: document %d:\nfast  %s\nnodes %s\nfrom\n%s", name, i+1, f.js, s.js, c.text)
			continue
		}
		if f.line != s.line || f.col != s.col {
			t.Errorf("%s: document %d at %d:%d, the nodes %d:%d", name, i+1, f.line, f.col, s.line, s.col)
		}
		if !reflect.DeepEqual(f.marks, s.marks) {
			t.Errorf("%s: document %d: marks\nfast  %v\nnodes %v\nfrom\n%s", name, i+1, f.marks, s.marks, c.text)
		}
	}
	return true
}

// chunksOf cuts a source into chunks as the stream does.
func chunksOf(src []byte) []yamlChunk {
	var cs []yamlChunk
	_ = yamlChunks(bytes.NewReader(src), func(c yamlChunk) bool {
		cs = append(cs, c)
		return true
	}, func(int) {})
	return cs
}

// The fast path writes the JSON and marks the nodes would (so that every
// error is placed as before), for every document it takes: the examples,
// generated clusters and meshes in block style, and the cases below,
// most of which it must leave to the nodes.
func TestYAMLFastPathMatchesNodes(t *testing.T) {
	type input struct {
		name string
		src  []byte
	}
	var inputs []input
	files, err := exampleFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{f, b})
	}
	var clusters, mesh bytes.Buffer
	if err := meshgen.ClustersYAML(&clusters, 20, meshgen.Block); err != nil {
		t.Fatal(err)
	}
	if err := meshgen.MeshYAML(&mesh, 20, meshgen.Block); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, input{"clusters", clusters.Bytes()}, input{"mesh", mesh.Bytes()})
	for i, s := range fastCases {
		inputs = append(inputs, input{fmt.Sprintf("case %d", i), []byte(s)})
	}
	taken, all := 0, 0
	for _, in := range inputs {
		for _, c := range chunksOf(in.src) {
			if isBlankYAML(c.text) {
				continue
			}
			all++
			if checkFastChunk(t, in.name, c) {
				taken++
			}
		}
	}
	// The generated documents are all in the subset.
	for _, in := range inputs[len(inputs)-len(fastCases)-2 : len(inputs)-len(fastCases)] {
		for _, c := range chunksOf(in.src) {
			if _, ok := yamlFast(c); !ok {
				t.Errorf("%s: the fast path left a generated document to the nodes:\n%s", in.name, c.text)
			}
		}
	}
	t.Logf("the fast path took %d of %d chunks", taken, all)
}

// fastCases are documents at the edges of the fast path's subset.
var fastCases = []string{
	"a: 1\n",
	"a: 1\nb: 2\n",
	"a:\n  b: 1\n  c: [] # empty\nd: {}\n",
	"a:\n- 1\n- x\nb: 2\n",
	"a:\n  - 1\n  - x\n",
	"- a: 1\n  b: 2\n- a: 3\n",
	"- - 1\n  - 2\n- - 3\n",
	"-   a: 1\n    b:\n    - c: d\n      e: f\n",
	"a:\n- b:\n  - c\n  d: 1\n",
	"a: \"x\\\"y\\\\z\\n\\t\"\nb: 'it''s'\n",
	"a: \"x\\/\"\n",
	"a: \"x\\u0041\"\n",
	"a: \"x\\q\"\n",
	"'a b': 1\n\"c: d\": 2\n",
	"a: b: c\n",
	"a: b:\n",
	"a:b: 1\n",
	"a: b#c\nd: e #f\n",
	"a: 0777\nb: 0x1F\nc: 1e3\nd: .inf\ne: -.inf\nf: .nan\ng: ~\nh: null\ni: True\nj: no\nk: 1.50\nl: +12\nm: -0\nn: 10s\no: 10.0.0.0\n",
	"a: -1\nb: -x\nc: ?x\nd: :x\n",
	"a: - x\n",
	"a: ? x\n",
	"a: !tag x\n",
	"a: &x 1\nb: *x\n",
	"<<: {a: 1}\nb: 2\n",
	"a: |\n  text\n",
	"a: >\n  text\n",
	"a: multi\n  line\n",
	"a:\nb: 1\n",
	"a: 1\na: 2\n",
	"a:\n  b: 1\n  b: 2\n",
	"a: {b: 1}\n",
	"a: [1, 2]\n",
	"a: {}x\n",
	"a: \"x\" y\n",
	"a: 'x' # c\n",
	"a:\tb\n",
	"a: 1\r\n",
	"a: caf\xc3\xa9\n",
	"  a: 1\n  b: 2\n",
	"a: 1\n b: 2\n",
	"a:\n  b: 1\n c: 2\n",
	"# comment\na: 1 # c\n\n# c\nb:\n  # c\n  c: 2\n",
	"a : 1\n",
	"a: 1\n- b\n",
	"- a\n- b\n",
	"x\n",
	"- a: 1\n  - b\n",
	"a: [] \nb: {}  # c\n",
	"\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\n",
	"a: -\n",
	"a: '\n",
	"a: \"x\n",
	"a:\n  -\n  - 1\n",
	"- \n  a: 1\n",
	"a: %x\n",
	"a: @x\n",
	"a: `x\n",
	"a: x,y[0]{1}\n",
	"a: ---\n",
	"a: ...\n",
	"a: #\n",
	"a: '' \n",
	"a: \"\"\n",
	"\"\": 1\n",
	"a:\n\n\n  b: 1\n",
	"? a\n: 1\n",
	"a: 1 #c\n  #d\n",
}

// FuzzYAMLFastPath holds the fast path to the nodes on any input: what it
// takes, it reads as they do.
func FuzzYAMLFastPath(f *testing.F) {
	for _, s := range fastCases {
		f.Add(s)
	}
	var b bytes.Buffer
	if err := meshgen.MeshYAML(&b, 2, meshgen.Block); err != nil {
		f.Fatal(err)
	}
	f.Add(b.String())
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range chunksOf([]byte(s)) {
			if !isBlankYAML(c.text) {
				checkFastChunk(t, "fuzz", c)
			}
		}
	})
}

// Errors in documents the fast paths read keep their file:line:col: a
// JSON document among YAML ones (read as JSON), a JSON array, and block
// documents (read without nodes), each at the value at fault, as the
// nodes place them. A blank line before a document is not counted twice.
func TestYAMLFastPathsPlaceErrors(t *testing.T) {
	const cl = `"@type": envoy.config.cluster.v3.Cluster`
	const js = `{"@type": "envoy.config.cluster.v3.Cluster", `
	for _, tc := range []struct {
		name, src string
		taken     int // chunks a fast path takes
		want      string
		nodes     string // what the nodes alone say, when it is not want
	}{
		{"JSON document", js + `"name": "a"}` + "\n---\n" + js + "\n \"name\": \"b\", \"lb_policy\": \"NOPE\"}\n", 2,
			`f.yaml:4:28: document 2: lb_policy: invalid value for enum field lbPolicy: "NOPE"; LbPolicy takes ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG`, ""},
		{"JSON document after blank lines", "---\n\n  " + js + `"name": "a", "name": "b"}` + "\n", 1,
			`f.yaml:3:61: document 1: name: duplicate key "name" (first on line 3): a key may appear only once in an object (otherwise the last would silently win)`,
			`f.yaml:3:61: document 1: name: duplicate key "name" (first on line 3): a key may appear only once in a mapping (otherwise the last would silently win)`},
		{"JSON document's value", js + `"name": "a"}` + "\n---\n" + js + `"name": "b", "connect_timeout": 5}` + "\n", 2,
			`f.yaml:3:78: document 2: connect_timeout: invalid google.protobuf.Duration value 5: a duration is a string of seconds ending in "s", e.g. "5s" or "0.25s"`, ""},
		{"JSON array and a block document", "[" + js + `"name": "a"},` + "\n " + js + `"name": "b", "lb_policy": "NOPE"}]` + "\n---\n" + cl + "\nname: c\nlb_policy: NOPE\n", 2,
			`f.yaml:2:73: document 2: lb_policy: invalid value for enum field lbPolicy: "NOPE"; LbPolicy takes ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG` + "\n" +
				`f.yaml:6:12: document 3: lb_policy: invalid value for enum field lbPolicy: "NOPE"; LbPolicy takes ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG`, ""},
		{"block documents", cl + "\nname: a\n---\n\n" + cl + "\nname: b\ncircuit_breakers:\n  thresholds:\n  - max_connections: -1\n", 2,
			`f.yaml:9:22: document 2: circuit_breakers.thresholds[0].max_connections: invalid google.protobuf.UInt32Value value -1: write a number`, ""},
		{"block unknown field", "# c\n\n" + cl + "\nname: a\nnope: 1\n", 1,
			`f.yaml:5:1: document 1: nope: unknown field "nope" (Cluster has no such field)`, ""},
		{"block list", "- " + cl + "\n  name: a\n- " + cl + "\n  name: b\n  lb_policy: NOPE # c\n", 1,
			`f.yaml:5:14: document 2: lb_policy: invalid value for enum field lbPolicy: "NOPE"; LbPolicy takes ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG`, ""},
		{"block wrapper", "name: a\nconstraints: env=prod\nresource:\n  " + cl + "\n  name: b\n", 1,
			`f.yaml:5:9: document 1: resource.name: "b" differs from the resource name "a": a resource's own name must equal the name it is served under`, ""},
		{"broken JSON document", js + `"name": "a"` + "\n---\n" + js + `"name": "b"}` + "\n", 1,
			`f.yaml:1:57: document 1: invalid JSON: unexpected end of JSON input`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := 0
			for _, c := range chunksOf([]byte(tc.src)) {
				start := skipSpace(c.text, 0)
				if _, ok := yamlFast(c); ok || start < len(c.text) && (c.text[start] == '{' || c.text[start] == '[') && json.Valid(c.text) {
					taken++
				}
			}
			if taken != tc.taken {
				t.Errorf("the fast paths take %d chunks, want %d", taken, tc.taken)
			}
			for _, nodes := range []bool{false, true} {
				nodesOnly.Store(nodes)
				_, err := Decode("f.yaml", []byte(tc.src))
				nodesOnly.Store(false)
				want := tc.want
				if nodes && tc.nodes != "" {
					want = tc.nodes
				}
				if fmt.Sprint(err) != want {
					t.Errorf("nodes only %v:\n%v\nwant\n%s", nodes, err, want)
				}
			}
		})
	}
}

// The generated clusters and meshes, as flow-style documents (JSON, read
// as JSON) and in block style (read without nodes), decode to the same
// variants as through the nodes, and to the same as their JSON array.
func TestYAMLFastPathsChangeNothing(t *testing.T) {
	const n = 100
	var arr bytes.Buffer
	if err := meshgen.Mesh(&arr, n); err != nil {
		t.Fatal(err)
	}
	want, err := Decode("m.json", arr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, style := range []meshgen.YAML{meshgen.Flow, meshgen.Block} {
		var b bytes.Buffer
		if err := meshgen.MeshYAML(&b, n, style); err != nil {
			t.Fatal(err)
		}
		for _, nodes := range []bool{false, true} {
			nodesOnly.Store(nodes)
			docs, err := Decode("m.yaml", b.Bytes())
			nodesOnly.Store(false)
			if err != nil {
				t.Fatalf("style %d, nodes only %v: %v", style, nodes, err)
			}
			if len(docs) != len(want) {
				t.Fatalf("style %d, nodes only %v: %d documents, want %d", style, nodes, len(docs), len(want))
			}
			for i, d := range docs {
				if d.Variant.Key() != want[i].Variant.Key() || string(d.Variant.Any()) != string(want[i].Variant.Any()) || d.Index != i+1 {
					t.Fatalf("style %d, nodes only %v: document %d (%d) differs: %v", style, nodes, i+1, d.Index, d.Variant.Key())
				}
			}
		}
	}
}
