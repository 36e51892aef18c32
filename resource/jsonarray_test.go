package resource

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

// jsonArray is a JSON array of n Clusters, one a line after the "[".
func jsonArray(n int) []byte {
	var b strings.Builder
	b.WriteString("[\n")
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c%d", "type": "STATIC"}`, i)
	}
	b.WriteString("\n]\n")
	return []byte(b.String())
}

// The documents of a JSON array are located by the line they start on,
// and a repeated key by its own line, however many documents come before.
func TestJSONArrayLines(t *testing.T) {
	const cl = `"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster"`
	src := "[\n  {" + cl + `, "name": "a"},` + "\n\n" +
		"  {" + cl + ",\n" + `   "name": "b"}, {` + cl + `, "name": "c"},` + "\n" +
		"  {" + cl + ",\n" + `   "name": "d",` + "\n" + `   "name": "e"},` + "\n" +
		"  {" + cl + `, "name": "f"}` + "\n]\n"
	var docs []*Document
	err := DecodeReader("a.json", strings.NewReader(src), JSON, func(d *Document) error { docs = append(docs, d); return nil })
	if want := `a.json:8:4: document 4: name: duplicate key "name" (first on line 7): a key may appear only once in an object (otherwise the last would silently win)`; err == nil || err.Error() != want {
		t.Errorf("errors: %v\nwant %s", err, want)
	}
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d:%d:%d", d.Index, d.Line, d.Column))
	}
	if want := "1:2:3 2:4:3 3:5:18 5:9:3"; strings.Join(got, " ") != want {
		t.Errorf("documents at %v, want %s", got, want)
	}

	docs = nil
	if err := DecodeReader("b.json", bytes.NewReader(jsonArray(3000)), JSON, func(d *Document) error { docs = append(docs, d); return nil }); err != nil || len(docs) != 3000 {
		t.Fatalf("%d documents, errors %v", len(docs), err)
	}
	for i, d := range docs {
		if d.Index != i+1 || d.Line != i+2 {
			t.Fatalf("document %d at index %d line %d, want line %d", i+1, d.Index, d.Line, i+2)
		}
	}
}

// BenchmarkDecodeJSONArray shows the cost of a JSON array grows linearly
// with its number of documents (ns/op over the sizes); it grew with the
// square, as every document's line was counted from the start of the file.
func BenchmarkDecodeJSONArray(b *testing.B) {
	for _, n := range []int{5000, 10000, 20000, 40000} {
		data := jsonArray(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Decode("b.json", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A repeated key is found however it is escaped, and at any depth.
func TestDuplicateKey(t *testing.T) {
	for js, want := range map[string]string{
		`{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}}`: "b.c[1].d",
		`{"a": 1, "\u0061": 2}`:                       "a",
		`{"x": [{"a": 1}, {"a": 2}], "y": {"a": 1}}`:  "",
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k3":3}`: "k3",
	} {
		p, _, _, found, _ := duplicateKey([]byte(js))
		if p != want || found != (want != "") {
			t.Errorf("%s: %q %v, want %q", js, p, found, want)
		}
	}
}

// A caller that stops early gets its error back, and the decoding
// goroutines end (TestMain checks for leaks).
func TestDecodeReaderStops(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	err := DecodeReader("b.json", bytes.NewReader(jsonArray(5000)), JSON, func(*Document) error {
		n++
		if n == 10 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 10 {
		t.Errorf("err %v after %d documents, want %v after 10", err, n, stop)
	}
}

// BenchmarkDecodeIstioClusters measures decoding and validating Istio-like
// clusters (internal/meshgen, about 1.5 KB of JSON each) on every core:
// the server's work per resource of a large apply.
func BenchmarkDecodeIstioClusters(b *testing.B) {
	var buf bytes.Buffer
	const n = 2000
	if err := meshgen.Clusters(&buf, n); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if err := DecodeReader("b.json", bytes.NewReader(buf.Bytes()), JSON, func(*Document) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "resources/s")
}

// BenchmarkDecodeIstioClustersYAML is BenchmarkDecodeIstioClusters with
// the clusters as YAML documents separated by "---": each its line of
// JSON (flow), or written in block style.
func BenchmarkDecodeIstioClustersYAML(b *testing.B) {
	for _, style := range []struct {
		name string
		s    meshgen.YAML
	}{{"flow", meshgen.Flow}, {"block", meshgen.Block}} {
		b.Run(style.name, func(b *testing.B) {
			var buf bytes.Buffer
			const n = 2000
			if err := meshgen.ClustersYAML(&buf, n, style.s); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(buf.Len()))
			for b.Loop() {
				if err := DecodeReader("b.yaml", bytes.NewReader(buf.Bytes()), Auto, func(*Document) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "resources/s")
		})
	}
}
