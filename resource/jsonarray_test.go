package resource

import (
	"fmt"
	"strings"
	"testing"
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
	docs, errs := splitJSON("a.json", []byte(src))
	if want := `a.json: document 4 (line 6): name: duplicate key "name" on line 8: a key may appear only once in an object (otherwise the last would silently win)`; errs.err() == nil || errs.err().Error() != want {
		t.Errorf("errors: %v\nwant %s", errs.err(), want)
	}
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d:%d", d.loc.Index, d.loc.Line))
	}
	if want := "1:2 2:4 3:5 5:9"; strings.Join(got, " ") != want {
		t.Errorf("documents at %v, want %s", got, want)
	}

	docs, errs = splitJSON("b.json", jsonArray(3000))
	if len(errs) > 0 || len(docs) != 3000 {
		t.Fatalf("%d documents, errors %v", len(docs), errs.err())
	}
	for i, d := range docs {
		if d.loc.Index != i+1 || d.loc.Line != i+2 {
			t.Fatalf("document %d at index %d line %d, want line %d", i+1, d.loc.Index, d.loc.Line, i+2)
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
