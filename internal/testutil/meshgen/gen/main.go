// Command gen writes a large resource set for benchmarks (BENCHMARKS.md):
//
//	go run ./internal/testutil/meshgen/gen -n 100000 -o clusters.json            # Istio-like clusters
//	go run ./internal/testutil/meshgen/gen -n 100000 -mesh -o mesh.json          # clusters and their endpoints
//	go run ./internal/testutil/meshgen/gen -n 100000 -yaml block -o clusters.yaml # block-style YAML documents
//	go run ./internal/testutil/meshgen/gen -n 100000 -yaml flow -o flow.yaml      # each resource's JSON line, separated by ---
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

func main() {
	n := flag.Int("n", 100000, "resources")
	mesh := flag.Bool("mesh", false, "clusters each followed by its endpoints (every client check passes), instead of clusters only")
	yml := flag.String("yaml", "", "write YAML documents separated by ---: block (block style) or flow (each resource's line of JSON); a JSON array when empty")
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
	switch *yml {
	case "":
	case "block", "flow":
		style := meshgen.Flow
		if *yml == "block" {
			style = meshgen.Block
		}
		write = func(w io.Writer, n int) error { return meshgen.ClustersYAML(w, n, style) }
		if *mesh {
			write = func(w io.Writer, n int) error { return meshgen.MeshYAML(w, n, style) }
		}
	default:
		fmt.Fprintf(os.Stderr, "-yaml %q: want block or flow (or nothing, for a JSON array)\n", *yml)
		os.Exit(2)
	}
	if err := write(w, *n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
