// Command gen writes resource/extensions_gen.go: a blank import of every
// package of the Envoy and CNCF xDS API modules that defines protobuf
// messages. Run it with go generate ./resource after changing the
// version of either module.
package main

import (
	"fmt"
	"os"

	"github.com/xdsd/xdsd/resource/internal/protomod"
)

func main() {
	// go generate runs in the directory of the file holding the
	// directive: resource/.
	pkgs, err := protomod.All(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile("extensions_gen.go", protomod.Source(pkgs), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
