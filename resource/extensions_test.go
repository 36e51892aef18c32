package resource

import (
	"bytes"
	"os"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/xdsd/xdsd/resource/internal/protomod"
)

// Every message of the Envoy and CNCF xDS API modules resolves by its
// type URL, so any extension resolves in a typed_config: the test walks
// the modules' generated code, as go.mod requires them, and fails on a
// message the binary does not register. extensions_gen.go must be what go
// generate writes for these versions.
func TestEveryAPIMessageRegistered(t *testing.T) {
	pkgs, err := protomod.All(".")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile("extensions_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gen, protomod.Source(pkgs)) {
		t.Errorf("extensions_gen.go is stale for the API module versions in go.mod: run go generate ./resource")
	}
	var messages, missing int
	for _, p := range pkgs {
		for _, f := range p.Files {
			names, err := protomod.Messages(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				messages++
				if _, err := protoregistry.GlobalTypes.FindMessageByURL(TypePrefix + n); err != nil {
					missing++
					if missing <= 20 {
						t.Errorf("%s%s (%s) is not registered", TypePrefix, n, p.ImportPath)
					}
				}
			}
		}
	}
	if missing > 20 {
		t.Errorf("... and %d more unregistered messages", missing-20)
	}
	// The walk must find the API, not an empty directory.
	if len(pkgs) < 400 || messages < 1500 {
		t.Errorf("found %d packages and %d messages: the walk missed the modules", len(pkgs), messages)
	}
	t.Logf("%d packages, %d messages", len(pkgs), messages)
}

// The extensions the hand-picked list used to refuse resolve, TypedStruct
// in both its packages included.
func TestCommonExtensionsResolve(t *testing.T) {
	for _, n := range []protoreflect.FullName{
		"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
		"envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor",
		"envoy.extensions.filters.http.compressor.v3.Compressor",
		"envoy.extensions.compression.gzip.compressor.v3.Gzip",
		"envoy.extensions.filters.http.wasm.v3.Wasm",
		"envoy.extensions.filters.http.oauth2.v3.OAuth2",
		"envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
		"envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig",
		"udpa.type.v1.TypedStruct",
		"xds.type.v3.TypedStruct",
	} {
		if _, err := protoregistry.GlobalTypes.FindMessageByName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}
