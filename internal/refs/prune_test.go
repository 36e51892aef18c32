package refs

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
	"github.com/xdsd/xdsd/resource"
)

// Of gives the same references for a pruned payload as for the whole,
// on every example of the repository, the listeners of these tests and
// the million's mesh; and the mesh's clusters and endpoints shrink.
func TestPruneKeepsTheReferences(t *testing.T) {
	var docs []*resource.Document
	add := func(source string, b []byte) {
		t.Helper()
		ds, err := resource.Decode(source, b)
		if err != nil {
			t.Fatalf("%s: %v", source, err)
		}
		docs = append(docs, ds...)
	}
	files, _ := filepath.Glob("../../examples/*/*.yaml")
	more, _ := filepath.Glob("../../examples/*/*/*.yaml")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		add(f, b)
	}
	if len(docs) == 0 {
		t.Fatal("no examples found")
	}
	add("listener.yaml", []byte(listener))
	add("tp2.yaml", []byte(tp2))
	var mesh bytes.Buffer
	if err := meshgen.Variants(&mesh, 2*meshgen.UnitVariants, 0, 1); err != nil {
		t.Fatal(err)
	}
	add("mesh.json", mesh.Bytes())
	var whole, pruned, withRefs, skipped int
	for _, d := range docs {
		if d.Message == nil {
			continue
		}
		b, err := proto.Marshal(d.Message)
		if err != nil {
			t.Fatal(err)
		}
		p, some, err := Prune(d.Message.ProtoReflect().Descriptor(), b)
		if err != nil {
			t.Fatalf("%s: %v", d.Location, err)
		}
		m := d.Message.ProtoReflect().Type().New().Interface()
		if err := proto.Unmarshal(p, m); err != nil {
			t.Fatalf("%s: the pruned payload does not decode: %v", d.Location, err)
		}
		want, got := Of(d.Message), Of(m)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s (%s): references\n%+v\npruned:\n%+v", d.Location, d.Variant.Name, want, got)
		}
		if len(want) > 0 {
			withRefs++
			if !some {
				t.Errorf("%s (%s): pruned to nothing, yet it makes references %+v", d.Location, d.Variant.Name, want)
			}
		}
		if d.Message.ProtoReflect().Descriptor().FullName() == "envoy.config.endpoint.v3.ClusterLoadAssignment" && d.Location.Source == "mesh.json" {
			if some {
				t.Errorf("%s (%s): endpoints pruned to something that may make references", d.Location, d.Variant.Name)
			}
			skipped++
		}
		if d.Location.Source == "mesh.json" {
			whole, pruned = whole+len(b), pruned+len(p)
		}
	}
	if skipped == 0 {
		t.Error("the mesh has no endpoints")
	}
	if withRefs < 10 {
		t.Errorf("only %d documents make references: the test checks little", withRefs)
	}
	if pruned*2 > whole {
		t.Errorf("the mesh's payloads pruned are %d bytes of %d: want under half", pruned, whole)
	}
	t.Logf("%d documents, %d making references; the mesh's payloads %d bytes, pruned %d", len(docs), withRefs, whole, pruned)
}
