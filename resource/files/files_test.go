package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoadExamples(t *testing.T) {
	docs, err := Load("../../examples")
	if err != nil {
		t.Fatalf("examples do not validate:\n%v", err)
	}
	count := map[string]int{}
	for _, d := range docs {
		count[d.Variant.Type.Name]++
	}
	if count["envoy.config.route.v3.RouteConfiguration"] < 6 || count["envoy.config.listener.v3.Listener"] < 3 {
		t.Errorf("unexpected example contents: %v", count)
	}
	// The four TP2 variants of "tp2", one written in proto JSON form.
	var tp2 []*resource.Document
	for _, d := range docs {
		if d.Variant.Name == "tp2" && d.Variant.Type.URL == resource.RouteURL {
			tp2 = append(tp2, d)
		}
	}
	if len(tp2) != 4 {
		t.Fatalf("tp2 variants = %d, want 4", len(tp2))
	}
	want := constraint.MustParse("env=prod && version=v1")
	if !tp2[3].Variant.Constraints.Equal(want) {
		t.Errorf("proto-JSON constraints = %q, want %q", tp2[3].Variant.Constraints, want)
	}
}

func TestLoadReportsEveryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "\"@type\": envoy.config.cluster.v3.Cluster\nname: \"\"\n")
	write("b.json", `{"@type": "envoy.config.cluster.v3.Cluster", "name": "ok"}`)
	write("c.yml", "\"@type\": envoy.config.cluster.v3.Cluster\nname: c\nbad: 1\n")
	write(".hidden.yaml", "garbage: [")
	write("notes.txt", "ignored")
	_, err := Load(dir)
	var l resource.ErrorList
	if !errors.As(err, &l) || len(l) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if !strings.Contains(l[0].Source, "a.yaml") || !strings.Contains(l[1].Source, "c.yml") || l[1].Path != "bad" {
		t.Errorf("errors = %v", err)
	}
}

// Load checks the set of all files once: each set-level problem is
// reported once, not once for its file and again for the whole set.
func TestLoadChecksSetOnce(t *testing.T) {
	const variant = "constraints: %s\nresource: {\"@type\": envoy.config.cluster.v3.Cluster, name: %s}\n"
	dir := t.TempDir()
	for name, s := range map[string]string{
		"a.yaml": fmt.Sprintf(variant, "env=prod || env=test", "c") + "---\n" + fmt.Sprintf(variant, "env=qa || env=test", "c"),
		"b.yaml": fmt.Sprintf(variant, "env=prod", "d"),
		"c.yaml": fmt.Sprintf(variant, "env=prod", "d"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	var l resource.ErrorList
	if !errors.As(err, &l) {
		t.Fatalf("Load error = %v, want an resource.ErrorList", err)
	}
	if len(l) != 2 ||
		!strings.HasSuffix(l[0].Source, "c.yaml") || !strings.Contains(l[0].Msg, "defined twice; first in "+filepath.Join(dir, "b.yaml")) ||
		!strings.HasSuffix(l[1].Source, "a.yaml") || l[1].Path != "constraints" || strings.Count(l[1].Msg, "overlap") != 1 {
		t.Errorf("want one duplicate (c.yaml) and one overlap (a.yaml), got %d errors:\n%v", len(l), err)
	}

	// Decode, for standard input and request bodies, checks its set too.
	data, err := os.ReadFile(filepath.Join(dir, "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resource.Decode("a.yaml", data); !errors.As(err, &l) || len(l) != 1 || !strings.Contains(l[0].Msg, "overlap") {
		t.Errorf("Decode: want one overlap error, got %v", err)
	}
}
