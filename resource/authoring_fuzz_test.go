package resource

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: the authoring decoder never panics, fails only with
// DocErrors, and what it accepts decodes again, from the JSON it kept, to
// the same variant.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("../examples/*/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}`,
		`[{"@type": "envoy.config.cluster.v3.Cluster", "name": "c"}, {"name": "x", "resource": {}}]`,
		"name: r\nconstraints: env=prod || !exists(v)\nresource:\n  \"@type\": envoy.config.route.v3.RouteConfiguration\n",
		"--- {a: 1}\n...\n---\n- 1\n- 2\n",
		"name: xdstp://a/envoy.config.listener.v3.ListenerCollection/c\nresource:\n  \"@type\": envoy.config.listener.v3.ListenerCollection\n  entries: [{locator: {authority: a, resource_type: envoy.config.listener.v3.Listener, id: x}}]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Decode("fuzz", data)
		if err != nil {
			var l ErrorList
			if !errors.As(err, &l) || len(l) == 0 {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			return
		}
		for _, d := range docs {
			again, err := Decode("again", d.Raw)
			if err != nil {
				t.Fatalf("accepted document does not decode again: %v\n%s", err, d.Raw)
			}
			v, w := d.Variant, again[0].Variant
			if v.Key() != w.Key() || string(v.Any()) != string(w.Any()) {
				t.Fatalf("re-decoding changed the variant: %v → %v", v.Key(), w.Key())
			}
		}
	})
}
