package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// `xdsd import --client grpc` writes what proxyless gRPC takes: its output
// passes `validate --client grpc` but for the one cluster no conversion
// keeps the meaning of, which import names on standard error, as a gRPC
// client would refuse it. Without --client both rule sets are reported,
// each labelled.
func TestImportForGRPC(t *testing.T) {
	src := filepath.Join("..", "..", "internal", "envoyimport", "testdata", "grpc.yaml")
	dir := t.TempDir()
	code, _, errOut := runCmd(t, "import", "--client", "grpc", "-o", dir, src)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "grpc: cluster ledger: gRPC rejects the cluster: STRICT_DNS") ||
		!strings.Contains(errOut, "note: cluster billing: STRICT_DNS, which proxyless gRPC refuses, became LOGICAL_DNS") {
		t.Errorf("import's report:\n%s", errOut)
	}
	if strings.Contains(errOut, "envoy:") {
		t.Errorf("--client grpc reported Envoy's rules:\n%s", errOut)
	}
	code, _, errOut = runCmd(t, "validate", "--client", "grpc", "-f", dir)
	if code != 1 || strings.Count(errOut, "[grpc/") != 1 || !strings.Contains(errOut, "(cluster ledger)") {
		t.Errorf("validate --client grpc of the import: exit %d\n%s", code, errOut)
	}

	code, _, errOut = runCmd(t, "import", src)
	if code != 0 || !strings.Contains(errOut, "grpc: cluster billing: gRPC rejects the cluster") || !strings.Contains(errOut, "grpc: cluster ledger:") {
		t.Errorf("import without --client: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "import", "--client", "java", src); code != 2 || !strings.Contains(errOut, `--client "java": want envoy or grpc`) {
		t.Errorf("import --client java: exit %d\n%s", code, errOut)
	}
}
