package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/bench/control"
)

// The product path: the xdsd binary as a user runs it (`xdsd serve` on a
// bolt file, `xdsd relay`), changed by the `xdsd apply` CLI from YAML
// files, beside the embedded server or raw gRPC driven through the
// control API. The compared servers are up together, each with its own
// load generator, and take the rounds by turns (A B A B …), so that a
// ratio is not a difference between two moments of a shared machine.

// xdsdBin builds the xdsd command from this checkout, once.
func (b *bench) xdsdBin() (string, error) {
	b.xdsdOnce.Do(func() {
		bin := filepath.Join(b.dir, "xdsd")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/xdsd/xdsd/cmd/xdsd")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			b.xdsdErr = fmt.Errorf("building xdsd: %w", err)
			return
		}
		b.xdsdPath = bin
	})
	return b.xdsdPath, b.xdsdErr
}

// proc is a running xdsd serve or relay.
type proc struct {
	bin         string // the xdsd binary it runs
	name        string
	cmd         *exec.Cmd
	xds, admin  string
	exited      chan struct{}
	logPath     string
	adminArgs   []string // how xdsd apply reaches its admin API
	stopOnce    sync.Once
	exitErr     error
	stderrLines chan struct{}
}

var (
	servingRE = regexp.MustCompile(`msg="xdsd (?:relay )?serving"`)
	xdsRE     = regexp.MustCompile(`\bxds=(\S+)`)
	adminRE   = regexp.MustCompile(`\badmin=(\S+)`)
)

// startXdsd runs `xdsd args...` and returns once it logs that it serves,
// with the addresses it logged. Its log goes to a file under b.dir.
func (b *bench) startXdsd(name string, args ...string) (*proc, error) {
	bin, err := b.xdsdBin()
	if err != nil {
		return nil, err
	}
	return b.startXdsdBin(bin, name, args...)
}

// startXdsdBin is startXdsd with another build of xdsd (an older one, to
// compare with): the one p's applies are made with too.
func (b *bench) startXdsdBin(bin, name string, args ...string) (*proc, error) {
	p := &proc{bin: bin, name: name, exited: make(chan struct{}), logPath: filepath.Join(b.dir, name+".log"), stderrLines: make(chan struct{})}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(bin, args...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	ready := make(chan [2]string, 1)
	go func() {
		// The log is read to its end, whatever the driver does, so that a
		// server logging every connection never blocks on a full pipe.
		defer close(p.stderrLines)
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if !sent && servingRE.MatchString(line) {
				x, a := xdsRE.FindStringSubmatch(line), adminRE.FindStringSubmatch(line)
				if x != nil && a != nil {
					ready <- [2]string{x[1], a[1]}
					sent = true
				}
			}
		}
	}()
	go func() {
		<-p.stderrLines
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	select {
	case addrs := <-ready:
		p.xds, p.admin = addrs[0], addrs[1]
		p.adminArgs = []string{"--admin", p.admin}
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited at start (%v): %s", name, p.exitErr, tail(p.logPath))
	case <-time.After(2 * time.Minute):
		p.stop()
		return nil, fmt.Errorf("%s did not say it serves within 2 minutes: %s", name, tail(p.logPath))
	}
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return strings.TrimSpace(string(data))
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) stop() {
	p.stopOnce.Do(func() {
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

// apply runs `xdsd apply` of file against p, as a user would, and returns
// its wall time.
func (b *bench) apply(p *proc, file string) (time.Duration, error) {
	cmd := exec.Command(p.bin, append(append([]string{"apply"}, p.adminArgs...), "-f", file)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	b.noteCPU(cmd)
	if err != nil {
		return took, fmt.Errorf("xdsd apply -f %s to %s: %v: %s", filepath.Base(file), p.name, err, strings.TrimSpace(out.String()))
	}
	return took, nil
}

// noteCPU sets lastCmdCPU to the CPU time (user+system) of cmd, which
// ran.
func (b *bench) noteCPU(cmd *exec.Cmd) {
	b.lastCmdCPU = 0
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			b.lastCmdCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
}

// clustersYAML is clusters first…first+n-1 as control.Setup describes them
// (and benchserver builds them), as a user writes them: one YAML document
// each, separated by ---.
func clustersYAML(names []string, alt string) string {
	pad := strings.Repeat("x", 200)
	var sb strings.Builder
	for i, n := range names {
		if i > 0 {
			sb.WriteString("---\n")
		}
		fmt.Fprintf(&sb, `"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: %s
type: EDS
eds_cluster_config:
  eds_config: {ads: {}}
lb_policy: ROUND_ROBIN
alt_stat_name: %s
metadata:
  filter_metadata:
    bench: {pad: %s}
`, n, alt, pad)
	}
	return sb.String()
}

// writeFile writes content to a new file under b.dir and returns its path.
func (b *bench) writeFile(name, content string) (string, error) {
	path := filepath.Join(b.dir, name)
	return path, os.WriteFile(path, []byte(content), 0o600)
}

// procCPUNanos is a process's CPU time so far, in nanoseconds: the sum of
// its threads' run time from /proc/PID/task/*/schedstat (nanoseconds, not
// the 10 ms ticks of /proc/PID/stat, which a change of a few ms would fall
// between), or procCPU where schedstat is missing. Go's threads live as
// long as the process, so none of its time is lost with an exited thread.
func procCPUNanos(pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return procCPU(pid)
	}
	var sum int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += n
		}
	}
	if sum == 0 {
		return procCPU(pid)
	}
	return sum
}

// arm is one of the servers a product-path scenario compares: its load
// generator, how a round's change is made, and what it cost.
type arm struct {
	name string
	lg   *loadgen // nil: no streams watch the change (only its wall time counts)
	// offset is added to the round numbers the arm is given, so that an
	// arm of a later phase on the same server still makes a change.
	offset int
	// change makes round's change and returns the wall time of the
	// command that made it (xdsd apply, or the control API's POST).
	change func(round int) (time.Duration, error)
	// cpu is the CPU time so far (ns) of the processes whose cost per
	// change is reported: the server, or a tree's origin.
	cpu func() int64
	// extraCPU, if set, is another set of processes' CPU so far (a tree's
	// relays).
	extraCPU func() int64

	// steps are, with XDSBENCH_APPLY_TIMING set, the ms of each step
	// of each round's xdsd apply (addTiming), by name.
	steps     map[string][]float64
	stepNames []string

	connectMS  float64
	streams    int
	all, p50   []float64 // ms from the change's start to every stream, to half
	wall       []float64 // ms of the command that made the change
	cpuMS      []float64 // ms of server CPU per change
	extraCPUMS []float64
	missing    int
	err        error
}

// connectArm starts a load generator for a and opens c's streams.
func (b *bench) connectArm(a *arm, c control.Command) error {
	var f fanout
	lg, err := b.connect(&f, scenario{connect: c}, &server{xds: c.Addr})
	if err != nil {
		return fmt.Errorf("%s: %w", a.name, err)
	}
	a.lg, a.connectMS, a.streams = lg, f.connectMS, c.Streams
	return nil
}

// runTurns makes rounds changes on every arm, by turns: round 1 on each
// arm in order, then round 2, and so on. An arm that fails stops taking
// turns; the others go on.
func (b *bench) runTurns(title string, arms []*arm, rounds int) {
	for round := 1; round <= rounds; round++ {
		for _, a := range arms {
			if a.err != nil {
				continue
			}
			if a.err = b.armRound(a, round); a.err != nil {
				b.logf("%s: %s: round %d: %v", title, a.name, round, a.err)
			}
		}
	}
}

// armRound makes one change on a and records what it cost.
func (b *bench) armRound(a *arm, round int) error {
	round += a.offset
	if a.lg != nil {
		marker := fmt.Sprintf(control.MarkerFormat, round)
		if err := a.lg.send(control.Command{Cmd: "expect", Marker: marker, TimeoutMS: 120000, Ack: true}); err != nil {
			return err
		}
		if ev, err := a.lg.next(); err != nil || ev.Event != "expecting" {
			return fmt.Errorf("expect not acknowledged: %v %v", ev.Event, err)
		}
	}
	cpu0, extra0 := a.cpu(), int64(0)
	if a.extraCPU != nil {
		extra0 = a.extraCPU()
	}
	t0 := time.Now()
	if a.lg != nil {
		if err := a.lg.send(control.Command{Cmd: "t0", T0: t0.UnixNano()}); err != nil {
			return err
		}
	}
	wall, err := a.change(round)
	if err != nil {
		return err
	}
	if a.lg != nil {
		ev, err := a.lg.next()
		if err != nil {
			return err
		}
		if ev.Error != "" {
			return fmt.Errorf("load generator: %s", ev.Error)
		}
		a.all, a.p50 = append(a.all, ev.MaxMS), append(a.p50, ev.P50MS)
		a.missing += ev.Missing
	}
	a.wall = append(a.wall, float64(wall)/1e6)
	a.cpuMS = append(a.cpuMS, float64(a.cpu()-cpu0)/1e6)
	if a.extraCPU != nil {
		a.extraCPUMS = append(a.extraCPUMS, float64(a.extraCPU()-extra0)/1e6)
	}
	return nil
}

// addTiming notes the steps of one xdsd apply --timing from its output
// ("timing (ms): prepare=0.1 connect=0.4 … (server: decode=0.5 …) …
// total=21.3"), "exec", the command's wall time before the process had
// initialised its packages (and after it printed the line): took less
// total, and the command's CPU time, cpu.
func (a *arm) addTiming(took, cpu time.Duration, out string) {
	if cpu > 0 {
		a.addStep("the command's CPU (user+system)", float64(cpu)/1e6)
	}
	_, line, ok := strings.Cut(out, "timing (ms):")
	if !ok {
		return
	}
	line, _, _ = strings.Cut(line, "\n")
	server := false
	for _, f := range strings.Fields(line) {
		if f == "(server:" {
			server = true
			continue
		}
		f, closing := strings.CutSuffix(f, ")")
		name, val, ok := strings.Cut(f, "=")
		if v, err := strconv.ParseFloat(val, 64); ok && err == nil {
			if server {
				name = "server " + name
			}
			a.addStep(name, v)
			if name == "total" {
				a.addStep("exec (wall less total)", float64(took)/1e6-v)
			}
		}
		if closing {
			server = false
		}
	}
}

// addStep notes one round's ms of the step called name.
func (a *arm) addStep(name string, v float64) {
	if a.steps == nil {
		a.steps = map[string][]float64{}
	}
	if _, ok := a.steps[name]; !ok {
		a.stepNames = append(a.stepNames, name)
	}
	a.steps[name] = append(a.steps[name], v)
}

// writeSteps reports, for the arms that have them, where xdsd apply's
// time went.
func writeSteps(w io.Writer, arms []*arm) {
	for _, a := range arms {
		if len(a.steps) == 0 {
			continue
		}
		fmt.Fprintf(w, "Where `xdsd apply`'s time went, %s (XDSBENCH_APPLY_TIMING: its CPU, and the steps xdsd apply --timing prints where the build has it; ms, median (min–max)):\n\n", a.name)
		fmt.Fprintln(w, "| step | ms |")
		fmt.Fprintln(w, "|---|---:|")
		for _, n := range a.stepNames {
			fmt.Fprintf(w, "| %s | %s |\n", n, spread(a.steps[n], "%.1f"))
		}
		fmt.Fprintln(w)
	}
}

func (a *arm) close() {
	if a.lg != nil {
		a.lg.stop()
		a.lg = nil // (closed once, whoever closes it first)
	}
}

// spread is a median with its min–max, as "median (min–max)".
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "–"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return fmt.Sprintf(format+" ("+format+"–"+format+")", median(s), s[0], s[len(s)-1])
}

// ratios is a[i] ÷ b[i] for each round both have.
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// verdict says whether a median ratio meets a bound.
func verdict(xs []float64, bound float64) string {
	if len(xs) == 0 {
		return "not measured"
	}
	if median(xs) <= bound {
		return "met"
	}
	return "NOT met"
}

// writeArms reports a product-path scenario's arms.
func writeArms(w io.Writer, title string, arms []*arm) { writeArmsAt(w, title, arms, "") }

// writeArmsAt is writeArms that also gives the load average at the start
// of the rounds (load) and now.
func writeArmsAt(w io.Writer, title string, arms []*arm, load string) {
	fmt.Fprintf(w, "## %s\n\n", title)
	fmt.Fprint(w, "Median (min–max) over the rounds; the servers took them by turns.")
	if load != "" {
		fmt.Fprintf(w, " Load average (1 min) at the start and the end of the rounds: %s, %s.", load, loadAvg())
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | streams | connect (ms) | all streams hold the change (ms) | p50 (ms) | change command's wall time (ms) | server CPU per change (ms) | missing |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, a := range arms {
		if a.err != nil {
			fmt.Fprintf(w, "| %s | error: %v |||||||\n", a.name, a.err)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %s | %d |\n", a.name, a.streams, a.connectMS,
			spread(a.all, "%.1f"), spread(a.p50, "%.1f"), spread(a.wall, "%.1f"), spread(a.cpuMS, "%.1f"), a.missing)
	}
	fmt.Fprintln(w)
	writeSteps(w, arms)
}

// writeRatio reports a's figures over ref's, round by round.
func writeRatio(w io.Writer, a, ref *arm, bound float64) {
	if a.err != nil || ref.err != nil {
		return
	}
	all, cpu := ratios(a.all, ref.all), ratios(a.cpuMS, ref.cpuMS)
	fmt.Fprintf(w, "%s ÷ %s: time to all streams %s (median of the rounds' ratios, min–max), target ≤ %.1f×: **%s**; server CPU per change %s.\n\n",
		a.name, ref.name, spread(all, "%.2f×"), bound, verdict(all, bound), spread(cpu, "%.2f×"))
}
