package resource

import (
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/internal/suggest"
)

// apiVersions names the API modules whose messages the binary registers
// (extensions_gen.go), with their versions when the build records them.
var apiVersions = sync.OnceValue(func() string {
	vs := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			vs[d.Path] = d.Version
		}
	}
	var parts []string
	for _, m := range []string{"github.com/envoyproxy/go-control-plane/envoy", "github.com/cncf/xds/go"} {
		if v := vs[m]; v != "" {
			m += " " + v
		}
		parts = append(parts, m)
	}
	return strings.Join(parts, " and ")
})

// unknownType explains a type URL this binary cannot resolve, and what to
// do: a type of the same name or a close spelling if there is one, and
// for an extension (not a resource), the TypedStruct that carries any
// extension by name.
func unknownType(url string, resource bool) string {
	name := url[strings.LastIndexByte(url, '/')+1:]
	var b strings.Builder
	fmt.Fprintf(&b, "unknown type %q", url)
	if s := similarTypes(name); len(s) > 0 {
		fmt.Fprintf(&b, ": did you mean %s?", strings.Join(s, " or "))
	} else if !strings.Contains(url, "/") || !strings.Contains(name, ".") {
		b.WriteString(": a type URL is type.googleapis.com/ and a full message name, e.g. type.googleapis.com/envoy.config.cluster.v3.Cluster")
	}
	fmt.Fprintf(&b, " (xdsd knows every message of %s", apiVersions())
	if resource {
		b.WriteString("; a resource is one of the xDS resource types, e.g. envoy.config.listener.v3.Listener)")
	} else {
		b.WriteString("; an extension outside them, such as a contrib or private filter, can be written as a " +
			"type.googleapis.com/xds.type.v3.TypedStruct whose type_url names it and whose value holds its configuration)")
	}
	return b.String()
}

// similarTypes lists up to three registered messages that name may have
// meant: those with the same last name, whatever the case (v3 first), or
// else those within a few edits of it.
func similarTypes(name string) []string {
	short := strings.ToLower(name[strings.LastIndexByte(name, '.')+1:])
	var same, close []string
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		full := string(mt.Descriptor().FullName())
		if strings.ToLower(string(mt.Descriptor().Name())) == short && full != name {
			same = append(same, full)
		} else if d := suggest.Distance(full, name, 4); d <= 3 {
			close = append(close, full)
		}
		return true
	})
	out := same
	if len(out) == 0 {
		out = close
	}
	sort.Slice(out, func(i, j int) bool {
		vi, vj := strings.Contains(out[i], ".v3."), strings.Contains(out[j], ".v3.")
		if vi != vj {
			return vi
		}
		return out[i] < out[j]
	})
	return out[:min(len(out), 3)]
}
