package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/internal/testutil/meshgen"
)

// Scenario m (issue 30, point 4): a million variants — an Istio-like mesh
// of clusters and endpoints, some endpoints in TP2 variants
// (meshgen.Variants) — applied by `xdsd apply --client none` in 10
// batches into `xdsd serve` on bolt and on etcd: each batch's time, the
// server's memory after each, and per stored variant; one change's
// fan-out to 5,000 streams with the million stored beside a server with
// 10,000 (by turns); `xdsd history`, `diff` and `rollback` of one
// resource; and two restarts of serve on the bolt file, until it serves.

// millionParts is how many batches the million go in.
const millionParts = 10

// anonMiB is a process's anonymous resident memory (resident less shared,
// from /proc/PID/statm), in MiB.
func anonMiB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, res, shared int64
	fmt.Sscan(string(data), &size, &res, &shared)
	return float64((res-shared)*int64(os.Getpagesize())) / (1 << 20)
}

// xdsdCmd runs an xdsd command against p's admin API and returns its wall
// time and output.
func (b *bench) xdsdCmd(p *proc, args ...string) (time.Duration, string, error) {
	bin, err := b.xdsdBin()
	if err != nil {
		return 0, "", err
	}
	cmd := exec.Command(bin, append(append([]string{args[0]}, p.adminArgs...), args[1:]...)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	b.noteCPU(cmd)
	if err != nil {
		return took, out.String(), fmt.Errorf("xdsd %s: %v: %s", strings.Join(args, " "), err, tail(strings.TrimSpace(out.String())))
	}
	return took, out.String(), nil
}

// millionFiles writes the mesh of n variants in parts files (once per
// run), and returns their paths.
func (b *bench) millionFiles(tag string, n, parts int) ([]string, error) {
	var out []string
	for k := range parts {
		path := filepath.Join(b.dir, fmt.Sprintf("%s-%02d.json", tag, k+1))
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		err = meshgen.Variants(f, n, k, parts)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// loadBatches applies files to p one by one and reports each batch's
// time and the server's memory after it.
func (b *bench) loadBatches(w io.Writer, p *proc, files []string, n int) (total time.Duration, err error) {
	fmt.Fprintln(w, "| batch | variants | `xdsd apply` (s) | variants/s | server anonymous memory after (MiB) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|")
	for k, f := range files {
		took, _, err := b.xdsdCmd(p, "apply", "--client", "none", "-f", f)
		if err != nil {
			return total, err
		}
		total += took
		per := n / len(files)
		fmt.Fprintf(w, "| %d | %d | %.1f | %.0f | %.0f |\n", k+1, per, took.Seconds(), float64(per)/took.Seconds(), anonMiB(p.pid()))
		b.logf("batch %d of %d: %.1f s", k+1, len(files), took.Seconds())
	}
	fmt.Fprintf(w, "\nAll %d variants in %.1f s (%.0f variants/s).\n\n", n, total.Seconds(), float64(n)/total.Seconds())
	return total, nil
}

func (b *bench) runMillion(w io.Writer) []error {
	n, streams, clusters := b.n(1_000_000, 10_000), b.n(5000, 50), 100
	small := b.n(10_000, 1_000)
	title := fmt.Sprintf("(m) a million variants: %d variants (meshgen.Variants) in %d batches into `xdsd serve` on bolt and on etcd; fan-out to %d streams with them stored beside %d stored; history, diff, rollback; restart", n, millionParts, streams, small)
	b.logf("%s", title)
	// Its sections also go to standard error as they are measured: the
	// whole takes a while, and a partial report is worth having.
	w = io.MultiWriter(w, os.Stderr)
	fmt.Fprintf(w, "## %s\n\n", title)
	files, err := b.millionFiles("million", n, millionParts)
	if err != nil {
		return b.failed(w, title, err)
	}
	smallFiles, err := b.millionFiles("small", small, 1)
	if err != nil {
		return b.failed(w, title, err)
	}
	names := clusterNames(clusters)

	// Into bolt, batch by batch.
	fmt.Fprintf(w, "### Into bolt\n\n")
	big, err := b.startServe("serve-m", names)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer func() { big.stop() }()
	before := anonMiB(big.pid())
	if _, err := b.loadBatches(w, big, files, n); err != nil {
		return b.failed(w, title, err)
	}
	time.Sleep(3 * time.Second) // the memory the applies freed goes back in the background
	after := anonMiB(big.pid())
	fmt.Fprintf(w, "Server anonymous memory: %.0f MiB before, %.0f MiB with the %d variants stored (3 s after the last batch): **%.0f bytes per stored variant**.\n\n",
		before, after, n, (after-before)*(1<<20)/float64(n))

	// The fan-out, by turns, beside a server with `small` stored.
	sm, err := b.startServe("serve-m-small", names)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer sm.stop()
	if _, _, err := b.xdsdCmd(sm, "apply", "--client", "none", "-f", smallFiles[0]); err != nil {
		return b.failed(w, title, err)
	}
	// --client none: the fan-out, without the client checks' share (their
	// cost with the million stored is measured below).
	bigArm, err := b.serveArm(fmt.Sprintf("xdsd serve, %d stored", n+clusters), big, names[0], 0, b.rounds, "--client", "none")
	if err != nil {
		return b.failed(w, title, err)
	}
	smallArm, err := b.serveArm(fmt.Sprintf("xdsd serve, %d stored", small+clusters), sm, names[0], 0, b.rounds, "--client", "none")
	if err != nil {
		return b.failed(w, title, err)
	}
	arms := []*arm{bigArm, smallArm}
	defer closeArms(arms)
	for _, c := range []struct {
		a    *arm
		addr string
	}{{bigArm, big.xds}, {smallArm, sm.xds}} {
		if err := b.connectArm(c.a, control.Command{Addr: c.addr, Streams: streams, Names: names}); err != nil {
			return b.failed(w, title, err)
		}
	}
	fantitle := fmt.Sprintf("(m) one change's fan-out to %d SotW streams × %d clusters, by `xdsd apply --client none`", streams, clusters)
	b.runTurns(fantitle, arms, b.rounds)
	closeArms(arms)
	writeArms(w, fantitle, arms)
	writeRatio(w, bigArm, smallArm, 1.1)
	errs := armErrs("m", arms)

	// The same change with apply's default client checks (--client auto,
	// no client connected now), by turns: what a user's apply costs.
	fmt.Fprintf(w, "`xdsd apply` of one cluster with its default client checks (`--client auto`), by turns:\n\n")
	checked := map[*proc][]float64{}
	for r := 1; r <= 3; r++ {
		for _, p := range []*proc{big, sm} {
			f, err := b.writeFile(fmt.Sprintf("%s-auto-%d.yaml", p.name, r), clustersYAML([]string{names[0]}, fmt.Sprintf("auto-%d", r)))
			if err == nil {
				var took time.Duration
				if took, _, err = b.xdsdCmd(p, "apply", "-f", f); err == nil {
					checked[p] = append(checked[p], took.Seconds()*1000)
				}
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	fmt.Fprintf(w, "- %d stored: %s ms\n- %d stored: %s ms\n\n", n+clusters, spread(checked[big], "%.0f"), small+clusters, spread(checked[sm], "%.0f"))
	sm.stop()

	// history, diff and rollback of the changed cluster.
	fmt.Fprintf(w, "### `xdsd history`, `diff` and `rollback` of one resource, %d stored\n\n", n+clusters)
	fmt.Fprintln(w, "| command | wall time (s) | target |")
	fmt.Fprintln(w, "|---|---:|---|")
	last := 1 + millionParts + b.rounds + 3 // the setup, the batches, the rounds, the checked applies
	for _, args := range [][]string{
		{"history", "cds", names[0]},
		{"diff", fmt.Sprint(last - 1), fmt.Sprint(last), "cds", names[0]},
		{"rollback", fmt.Sprint(last - 1), "cds", names[0]},
	} {
		took, _, err := b.xdsdCmd(big, args...)
		if err != nil {
			errs = append(errs, err)
			fmt.Fprintf(w, "| `xdsd %s` | error: %v | < 1 s |\n", strings.Join(args, " "), err)
			continue
		}
		verdict := "met"
		if took >= time.Second {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "| `xdsd %s` | %.2f | < 1 s: **%s** |\n", strings.Join(args, " "), took.Seconds(), verdict)
	}
	fmt.Fprintln(w)

	// Restarts on the bolt file.
	fmt.Fprintf(w, "### Restart on bolt, %d stored\n\n", n+clusters)
	big.stop()
	var starts []float64
	for i := range 2 {
		start := time.Now()
		p, err := b.startXdsd(fmt.Sprintf("serve-m-restart-%d", i+1), append([]string{"serve", "--store", "bolt:" + filepath.Join(b.dir, "serve-m.db")}, loopback...)...)
		if err != nil {
			return append(errs, b.failed(w, title, err)...)
		}
		took := time.Since(start)
		starts = append(starts, took.Seconds())
		fmt.Fprintf(w, "- restart %d: serving after %.2f s, anonymous memory %.0f MiB\n", i+1, took.Seconds(), anonMiB(p.pid()))
		p.stop()
	}
	verdict := "met"
	if median(starts) >= 5 {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "\nFrom the process's start to its log's \"xdsd serving\" (the store loaded, both ports open): %s s, target < 5 s: **%s**.\n\n", spread(starts, "%.2f"), verdict)

	// Into etcd, batch by batch.
	fmt.Fprintf(w, "### Into etcd\n\n")
	e, err := b.startEtcd()
	if err != nil {
		return append(errs, b.failed(w, title, err)...)
	}
	defer e.stop()
	ep, err := b.startXdsd("serve-m-etcd", append([]string{"serve", "--store", e.url("million")}, loopback...)...)
	if err != nil {
		return append(errs, b.failed(w, title, err)...)
	}
	defer ep.stop()
	before = anonMiB(ep.pid())
	if _, err := b.loadBatches(w, ep, files, n); err != nil {
		return append(errs, b.failed(w, title, err)...)
	}
	time.Sleep(3 * time.Second)
	after = anonMiB(ep.pid())
	fmt.Fprintf(w, "Server anonymous memory: %.0f MiB before, %.0f MiB after: %.0f bytes per stored variant; etcd's own: %.0f MiB.\n\n",
		before, after, (after-before)*(1<<20)/float64(n), anonMiB(e.cmd.Process.Pid))
	return errs
}
