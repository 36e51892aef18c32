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
	"strings"

	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

func main() {
	n := flag.Int("n", 100000, "resources")
	mesh := flag.Bool("mesh", false, "clusters each followed by its endpoints (every client check passes), instead of clusters only")
	parts := flag.Int("parts", 0, "write the mesh of -n variants (TP2 variants among them) in this many parts, one JSON array each, to -o with -01.json, -02.json… for .json (e.g. -n 1000000 -parts 10 -o mesh.json)")
	yml := flag.String("yaml", "", "write YAML documents separated by ---: block (block style) or flow (each resource's line of JSON); a JSON array when empty")
	out := flag.String("o", "", "output file (standard output when empty)")
	flag.Parse()
	if *parts > 0 {
		if *out == "" {
			fmt.Fprintln(os.Stderr, "-parts needs -o")
			os.Exit(2)
		}
		for k := range *parts {
			name := strings.TrimSuffix(*out, ".json") + fmt.Sprintf("-%02d.json", k+1)
			f, err := os.Create(name)
			if err == nil {
				err = meshgen.Variants(f, *n, k, *parts)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
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
