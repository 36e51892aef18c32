package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/xdsd/xdsd/internal/clientcheck"
	"github.com/xdsd/xdsd/internal/envoyimport"
	"github.com/xdsd/xdsd/resource"
)

func runImport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	dir := fs.String("o", "", "write listeners.yaml, clusters.yaml, endpoints.yaml and secrets.yaml into this directory (default: all to standard output)")
	authority := fs.String("authority", "", "rename every resource to xdstp://AUTHORITY/<type>/<name>, rewriting the references between them")
	forClient := fs.String("client", "", "the clients the output is for: envoy, grpc (also converts what gRPC refuses, where the meaning survives); default: check for both")
	pos, err := parse(fs, args, "import [-o DIR] [--authority A] [--client envoy|grpc] ENVOY.yaml", stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one Envoy bootstrap file, got %d arguments", len(pos))
	}
	checkFor := []clientcheck.RuleSet{clientcheck.Envoy, clientcheck.GRPC}
	switch *forClient {
	case "":
	case string(clientcheck.Envoy), string(clientcheck.GRPC):
		checkFor = []clientcheck.RuleSet{clientcheck.RuleSet(*forClient)}
	default:
		return usagef("--client %q: want envoy or grpc (or leave it out to check for both)", *forClient)
	}
	src := pos[0]
	var data []byte
	if src == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(src)
	}
	if err != nil {
		return err
	}
	var b bootstrapv3.Bootstrap
	if err := resource.DecodeMessage(src, data, &b); err != nil {
		printDocErrors(stderr, err)
		return errInvalid
	}
	res, err := envoyimport.Convert(&b, envoyimport.Options{Authority: *authority, GRPC: *forClient == string(clientcheck.GRPC)})
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	files, err := res.Files()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%s: static_resources holds no listeners, clusters or secrets", src)
	}
	if *dir == "" {
		for i, f := range files {
			if i > 0 {
				fmt.Fprintln(stdout, "---")
			}
			stdout.Write(f.Data)
		}
	} else {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			return err
		}
		for _, f := range files {
			// Never over another file: an import is a starting point, and
			// the files it would replace may have been edited since.
			p := filepath.Join(*dir, f.Name)
			w, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s exists: remove it, or import into another directory", p)
			}
			if err != nil {
				return err
			}
			_, err = w.Write(f.Data)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stderr, "imported %s, %s, %s, %s\n", plural(len(res.Listeners), "listener"), plural(len(res.Clusters), "cluster"),
		plural(len(res.Endpoints), "endpoint set"), plural(len(res.Secrets), "secret"))
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "note: "+n)
	}
	for _, n := range importFindings(files, checkFor) {
		fmt.Fprintln(stderr, n)
	}
	return nil
}

// importFindings runs the client checks on what import wrote, so that it
// says what each client it is for would still refuse: what it could not
// convert. References to what the bootstrap did not hold are left out:
// the notes name them already, with what to apply.
func importFindings(files []envoyimport.File, clients []clientcheck.RuleSet) []string {
	var out []string
	for _, c := range clients {
		k := clientcheck.New(c)
		for _, f := range files {
			docs, err := resource.Decode(f.Name, f.Data)
			if err != nil {
				out = append(out, fmt.Sprintf("warning: %s: %v", f.Name, err))
				continue
			}
			for _, d := range docs {
				k.Add(d)
			}
		}
		for _, f := range k.Findings() {
			if f.Rule == "refs/dangling" {
				continue
			}
			sev := ""
			if f.Severity == clientcheck.Warning {
				sev = "warning: "
			}
			out = append(out, fmt.Sprintf("%s: %s: %s%s [%s]", string(c), f.Resource, sev, f.Msg, f.Rule))
		}
	}
	return out
}
