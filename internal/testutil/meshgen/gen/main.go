// Command gen writes a large resource set for benchmarks (BENCHMARKS.md):
//
//	go run ./internal/testutil/meshgen/gen -n 100000 -o clusters.json            # Istio-like clusters
//	go run ./internal/testutil/meshgen/gen -n 100000 -mesh -o mesh.json          # clusters and their endpoints
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

func main() {
	n := flag.Int("n", 100000, "resources")
	mesh := flag.Bool("mesh", false, "clusters each followed by its endpoints (every client check passes), instead of clusters only")
	out := flag.String("o", "", "output file (standard output when empty)")
	flag.Parse()
	w := os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	write := meshgen.Clusters
	if *mesh {
		write = meshgen.Mesh
	}
	if err := write(w, *n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
