// Command xdsbench runs xdsd side by side with its peers — go-control-plane
// (SnapshotCache and LinearCache) and a raw-gRPC baseline that pushes the
// same pre-encoded bytes (the practical limit) — under the same load, on one
// machine, in one run, and prints a markdown report with absolute figures,
// ratios and the targets of the benchmark issue.
//
// Every server runs alone in its own process (cmd/benchserver); the load
// comes from another process (cmd/loadgen). From bench/:
//
//	go run ./cmd/xdsbench                    # every scenario (under 10 minutes on 2 cores)
//	go run ./cmd/xdsbench -quick             # a smoke run with tiny numbers
//	go run ./cmd/xdsbench -scenarios a,e     # some scenarios
//	go run ./cmd/xdsbench -scenarios h,i     # the product path: the xdsd binary changed by xdsd apply
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/bench/control"
)

func main() {
	var (
		scenarios = flag.String("scenarios", "a,b,c,d,e,f,relay", "scenarios to run: a,b,c (fan-out), d (glob), e (idle memory), f (TP2 variants), relay; not in the default set: g (100,000 streams), r (replicas on etcd; builds etcd from its Go module once, or uses $ETCD), and on the product path (the xdsd binary, changed by xdsd apply): h (serve beside the embedded server on bolt), i (h over mTLS with a policy, beside raw gRPC over mTLS), apply (apply's wall time beside 100,000 idle streams), tiers (an origin under two levels of relays)")
		impls     = flag.String("impls", "xdsd,gcp-snapshot,gcp-linear,raw", "implementations to compare where a scenario allows")
		rounds    = flag.Int("rounds", 9, "changes per fan-out measurement; the report gives medians")
		quick     = flag.Bool("quick", false, "smoke run: tiny numbers, to prove the harness works")
		out       = flag.String("o", "", "also write the report to this file")
	)
	flag.Parse()
	b, err := newBench(*quick, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer b.cleanup()
	report, err := b.run(strings.Split(*scenarios, ","), strings.Split(*impls, ","))
	os.Stdout.WriteString(report)
	if *out != "" {
		os.WriteFile(*out, []byte(report), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdsbench:", err)
		os.Exit(1)
	}
}

type bench struct {
	dir        string
	serverBin  string
	loadgenBin string
	quick      bool
	rounds     int
	log        io.Writer

	// The xdsd command, built by xdsdBin for the product-path scenarios.
	// lastCmdCPU is the CPU time (user+system) of the last xdsdCmd.
	lastCmdCPU time.Duration

	xdsdOnce sync.Once
	xdsdPath string
	xdsdErr  error
}

func newBench(quick bool, rounds int) (*bench, error) {
	dir, err := os.MkdirTemp("", "xdsbench")
	if err != nil {
		return nil, err
	}
	b := &bench{dir: dir, quick: quick, rounds: rounds, log: os.Stderr,
		serverBin: filepath.Join(dir, "benchserver"), loadgenBin: filepath.Join(dir, "loadgen")}
	for bin, pkg := range map[string]string{b.serverBin: "./cmd/benchserver", b.loadgenBin: "./cmd/loadgen"} {
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	if quick {
		b.rounds = 2
	}
	return b, nil
}

func (b *bench) cleanup() { os.RemoveAll(b.dir) }

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// server is a running benchserver.
type server struct {
	impl    string
	cmd     *exec.Cmd
	xds     string
	control string
	pid     int
}

func (b *bench) startServer(impl string, extra ...string) (*server, error) {
	cmd := exec.Command(b.serverBin, append([]string{"--impl", impl}, extra...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var hello struct {
		XDS     string `json:"xds"`
		Control string `json:"control"`
		PID     int    `json:"pid"`
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &hello) != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("benchserver %s did not start: %v %q", impl, err, line)
	}
	return &server{impl: impl, cmd: cmd, xds: hello.XDS, control: hello.Control, pid: hello.PID}, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

func (s *server) post(path string, body any, out any) error {
	js, _ := json.Marshal(body)
	resp, err := http.Post("http://"+s.control+path, "application/json", bytes.NewReader(js))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s %s", s.impl, path, resp.Status, data)
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (s *server) stats() (control.ServerStats, error) {
	resp, err := http.Get("http://" + s.control + "/stats")
	if err != nil {
		return control.ServerStats{}, err
	}
	defer resp.Body.Close()
	var st control.ServerStats
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

func (s *server) gc() (control.ServerStats, error) {
	var st control.ServerStats
	err := s.post("/gc", struct{}{}, &st)
	return st, err
}

// loadgen is a running load generator.
type loadgen struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	events *bufio.Scanner
}

func (b *bench) startLoadgen() (*loadgen, error) {
	cmd := exec.Command(b.loadgenBin)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &loadgen{cmd: cmd, in: in, events: sc}, nil
}

func (l *loadgen) send(c control.Command) error {
	js, _ := json.Marshal(c)
	_, err := l.in.Write(append(js, '\n'))
	return err
}

func (l *loadgen) next() (control.Event, error) {
	if !l.events.Scan() {
		return control.Event{}, fmt.Errorf("load generator exited: %v", l.events.Err())
	}
	var e control.Event
	if err := json.Unmarshal(l.events.Bytes(), &e); err != nil {
		return e, err
	}
	if e.Event == "error" {
		return e, fmt.Errorf("load generator: %s", e.Error)
	}
	return e, nil
}

func (l *loadgen) stop() {
	l.send(control.Command{Cmd: "quit"})
	l.in.Close()
	done := make(chan struct{})
	go func() { l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		l.cmd.Process.Kill()
		<-done
	}
}

// fanout is one measured fan-out: medians over the rounds.
type fanout struct {
	impl           string
	connectMS      float64
	p50, p99, max  float64 // ms from the change to the stream's receipt
	cpuPerResponse float64 // server CPU µs per response pushed
	cpuPerChange   float64 // server CPU ms per change
	responses      float64 // responses per change
	bytesPerStream float64
	rssPerStream   float64
	heapPerStream  float64 // of it, Go heap in use
	stackPerStream float64 // of it, goroutine stacks
	encodedLen     int
	missing        int
	streams        int // xDS streams open on the measured server (a relay's origin) once connected
	rssMiB         float64
	// Scenario r, two replicas: the "all" of each replica's streams, and
	// etcd's CPU per change.
	maxApplying, maxFollowing, etcdCPU float64
	err                                error
}

// scenario describes a load.
type scenario struct {
	id, title string
	setup     control.Setup
	connect   control.Command
	impls     []string // those that can run it
	change    int      // clusters changed per round
	rss       bool     // also measure the server's RSS after GC with the streams connected
	// serverArgs are extra benchserver flags (a replica's --store).
	serverArgs []string
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// runFanout measures one implementation under one scenario.
func (b *bench) runFanout(sc scenario, impl string, upstreamOf func() (*server, func(), error)) fanout {
	f := fanout{impl: impl}
	f.err = b.fanout(&f, sc, impl, upstreamOf)
	return f
}

func (b *bench) fanout(f *fanout, sc scenario, impl string, upstreamOf func() (*server, func(), error)) error {
	var srv *server
	var err error
	var measured *server // whose CPU is reported: the server, or a relay's origin
	if upstreamOf != nil {
		origin, stopOrigin, err := upstreamOf()
		if err != nil {
			return err
		}
		defer stopOrigin()
		if srv, err = b.startServer("relay", "--upstream", origin.xds); err != nil {
			return err
		}
		measured = origin
		defer srv.stop()
	} else {
		if srv, err = b.startServer(impl, sc.serverArgs...); err != nil {
			return err
		}
		defer srv.stop()
		var st control.ServerStats
		if err := srv.post("/setup", sc.setup, &st); err != nil {
			return err
		}
		f.encodedLen = st.EncodedLen
		measured = srv
	}
	var base control.ServerStats
	if sc.rss {
		if base, err = srv.gc(); err != nil {
			return err
		}
	}
	lg, err := b.connect(f, sc, srv)
	if err != nil {
		return err
	}
	defer lg.stop()
	if sc.rss {
		loaded, err := srv.gc()
		if err != nil {
			return err
		}
		f.rssMiB = float64(loaded.RSSBytes) / (1 << 20)
		f.rssPerStream = float64(loaded.RSSBytes-base.RSSBytes) / float64(sc.connect.Streams)
		f.heapPerStream = float64(loaded.HeapBytes-base.HeapBytes) / float64(sc.connect.Streams)
		f.stackPerStream = float64(loaded.StackBytes-base.StackBytes) / float64(sc.connect.Streams)
	}
	st, err := measured.stats()
	if err != nil {
		return err
	}
	f.streams = st.Streams
	var p50s, p99s, maxs, cpus, perResp, resps, bytesPer []float64
	// XDSBENCH_CPUPROFILE_DIR=dir profiles the server's CPU for 20 s while
	// rounds go on, and keeps making rounds until the profile is saved: the
	// profile then covers fan-outs and the ACKs they bring, not setup.
	var profiled chan struct{}
	if dir := os.Getenv("XDSBENCH_CPUPROFILE_DIR"); dir != "" {
		profiled = make(chan struct{})
		go func() {
			defer close(profiled)
			saveProfile(measured, "/debug/pprof/profile?seconds=20", filepath.Join(dir, sc.id+"-"+impl+".cpu"))
		}()
	}
	more := func(round int) bool {
		if round <= b.rounds {
			return true
		}
		if profiled == nil {
			return false
		}
		select {
		case <-profiled:
			return false
		default:
			return true
		}
	}
	for round := 1; more(round); round++ {
		ev, cpu, err := b.round(lg, measured, sc, round)
		if err != nil {
			return err
		}
		p50s, p99s, maxs = append(p50s, ev.P50MS), append(p99s, ev.P99MS), append(maxs, ev.MaxMS)
		cpus = append(cpus, cpu/1e6)
		resps = append(resps, float64(ev.Responses))
		if ev.Responses > 0 {
			perResp = append(perResp, cpu/1e3/float64(ev.Responses))
		}
		bytesPer = append(bytesPer, ev.BytesPerStream)
		f.missing += ev.Missing
		// Each round on stderr, so that a report's medians can be given
		// with their spread (min–max) and rounds of several runs pooled.
		b.logf("round %s %s %d: all %.1f ms, cpu %.1f ms, responses %.0f", sc.id, impl, round, ev.MaxMS, cpu/1e6, float64(ev.Responses))
	}
	f.p50, f.p99, f.max = median(p50s), median(p99s), median(maxs)
	f.cpuPerChange, f.cpuPerResponse, f.responses = median(cpus), median(perResp), median(resps)
	f.bytesPerStream = median(bytesPer)
	return nil
}

// connect starts a load generator and opens the scenario's streams to srv.
func (b *bench) connect(f *fanout, sc scenario, srv *server) (*loadgen, error) {
	lg, err := b.startLoadgen()
	if err != nil {
		return nil, err
	}
	c := sc.connect
	c.Cmd, c.Addr = "connect", srv.xds
	err = lg.send(c)
	var ev control.Event
	if err == nil {
		ev, err = lg.next()
	}
	if err != nil {
		lg.stop()
		return nil, err
	}
	f.connectMS = ev.MS
	return lg, nil
}

// round makes one change and returns what the load generator saw and the
// server CPU it cost, in nanoseconds.
func (b *bench) round(lg *loadgen, measured *server, sc scenario, round int) (control.Event, float64, error) {
	before, err := measured.stats()
	if err != nil {
		return control.Event{}, 0, err
	}
	marker := fmt.Sprintf(control.MarkerFormat, round)
	if err := lg.send(control.Command{Cmd: "expect", Marker: marker, TimeoutMS: 120000, Ack: true}); err != nil {
		return control.Event{}, 0, err
	}
	if ev, err := lg.next(); err != nil || ev.Event != "expecting" {
		return control.Event{}, 0, fmt.Errorf("expect not acknowledged: %v %v", ev.Event, err)
	}
	if err := lg.send(control.Command{Cmd: "t0", T0: time.Now().UnixNano()}); err != nil {
		return control.Event{}, 0, err
	}
	if err := measured.post("/change", control.Change{Round: round, Count: sc.change}, nil); err != nil {
		return control.Event{}, 0, err
	}
	ev, err := lg.next()
	if err != nil {
		return control.Event{}, 0, err
	}
	after, err := measured.stats()
	if err != nil {
		return control.Event{}, 0, err
	}
	return ev, float64(after.CPUNanos - before.CPUNanos), nil
}

// runIdle measures memory per idle ACKed stream: RSS after GC with the
// streams connected, less RSS after GC before.
func (b *bench) runIdle(sc scenario, impl string) fanout {
	f := fanout{impl: impl}
	f.err = b.idle(&f, sc, impl)
	return f
}

func (b *bench) idle(f *fanout, sc scenario, impl string) error {
	srv, err := b.startServer(impl)
	if err != nil {
		return err
	}
	defer srv.stop()
	if err := srv.post("/setup", sc.setup, nil); err != nil {
		return err
	}
	base, err := srv.gc()
	if err != nil {
		return err
	}
	lg, err := b.connect(f, sc, srv)
	if err != nil {
		return err
	}
	defer lg.stop()
	loaded, err := srv.gc()
	if err != nil {
		return err
	}
	f.rssPerStream = float64(loaded.RSSBytes-base.RSSBytes) / float64(sc.connect.Streams)
	f.heapPerStream = float64(loaded.HeapBytes-base.HeapBytes) / float64(sc.connect.Streams)
	f.stackPerStream = float64(loaded.StackBytes-base.StackBytes) / float64(sc.connect.Streams)
	if dir := os.Getenv("XDSBENCH_PROFILE_DIR"); dir != "" {
		// A heap profile of the server holding the idle streams: where
		// the memory per stream goes.
		saveProfile(srv, "/debug/pprof/heap", filepath.Join(dir, impl+".heap"))
		saveProfile(srv, "/debug/pprof/goroutine?debug=1", filepath.Join(dir, impl+".goroutines"))
	}
	return nil
}

// saveProfile writes what the server's pprof endpoint path answers to file.
func saveProfile(s *server, path, file string) {
	resp, err := http.Get("http://" + s.control + path)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	os.WriteFile(file, data, 0o644)
}

func (b *bench) scenarios() map[string]scenario {
	n := func(full, quick int) int {
		if b.quick {
			return quick
		}
		return full
	}
	names := func(k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf(control.ClusterFormat, i)
		}
		return out
	}
	all := []string{"xdsd", "gcp-snapshot", "gcp-linear", "raw"}
	streams := n(5000, 50)
	out := map[string]scenario{
		"a": {id: "a", title: fmt.Sprintf("(a) %d SotW streams × %d clusters, change 1", streams, 10),
			setup: control.Setup{Clusters: 10}, connect: control.Command{Streams: streams, Names: names(10)}, impls: all, change: 1},
		"b": {id: "b", title: fmt.Sprintf("(b) %d SotW streams × %d clusters, change 1", streams, 100),
			setup: control.Setup{Clusters: 100}, connect: control.Command{Streams: streams, Names: names(100)}, impls: all, change: 1},
		"c": {id: "c", title: fmt.Sprintf("(c) %d delta streams × %d clusters, change 1", streams, 100),
			setup: control.Setup{Clusters: 100}, connect: control.Command{Streams: streams, Names: names(100), Delta: true}, impls: all, change: 1},
		"d": {id: "d", title: fmt.Sprintf("(d) glob collection of %d resources, %d delta subscribers, change 1", n(100000, 200), n(100, 5)),
			setup: control.Setup{Clusters: n(100000, 200), Glob: true}, connect: control.Command{Streams: n(100, 5), Delta: true, Glob: control.GlobURL, Expect: n(100000, 200)},
			impls: []string{"xdsd"}, change: 1},
		"e": {id: "e", title: fmt.Sprintf("(e) %d idle ACKed SotW streams × 10 clusters: memory per stream", n(10000, 100)),
			setup: control.Setup{Clusters: 10}, connect: control.Command{Streams: n(10000, 100), Names: names(10)}, impls: all},
	}
	out["g"] = scenario{id: "g", title: fmt.Sprintf("(g) %d idle SotW streams × 10 clusters on one server, change 1", n(100000, 200)),
		setup: control.Setup{Clusters: 10}, connect: control.Command{Streams: n(100000, 200), Names: names(10)},
		impls: []string{"xdsd", "gcp-linear"}, change: 1, rss: true}
	params := make([]map[string]string, 8)
	for i := range params {
		params[i] = map[string]string{"v": fmt.Sprint(i)}
	}
	out["f"] = scenario{id: "f", title: fmt.Sprintf("(f) %d resources × 8 variants, %d subscribers with parameters: time to every first response", n(1000, 20), n(10000, 80)),
		setup: control.Setup{Clusters: n(1000, 20), Variants: 8}, connect: control.Command{Streams: n(10000, 80), Delta: true, Wildcard: true, Params: params, Expect: n(1000, 20)},
		impls: []string{"xdsd"}, change: 1}
	out["r"] = scenario{id: "r", title: fmt.Sprintf("(r) replicas on etcd: %d SotW streams × 10 clusters, change 1, on one replica or on two with half each", streams),
		setup: control.Setup{Clusters: 10}, connect: control.Command{Streams: streams, Names: names(10)}, impls: []string{"xdsd"}, change: 1}
	rs := n(1000, 20)
	out["relay"] = scenario{id: "relay", title: fmt.Sprintf("relay: %d SotW streams × 10 clusters, change 1, with and without a relay", rs),
		setup: control.Setup{Clusters: 10}, connect: control.Command{Streams: rs, Names: names(10)}, impls: []string{"xdsd"}, change: 1}
	return out
}

func (b *bench) run(ids, impls []string) (string, error) {
	var rep strings.Builder
	fmt.Fprintf(&rep, "# xdsd benchmark report\n\nMachine: %s/%s, %d CPUs, %s. Command: `cd bench && go run ./cmd/xdsbench%s`. Rounds per fan-out: %d (medians).\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), map[bool]string{true: " -quick", false: ""}[b.quick], b.rounds)
	all := b.scenarios()
	var failed []string
	results := map[string]map[string]fanout{}
	for _, id := range ids {
		if run, ok := b.product()[strings.TrimSpace(id)]; ok {
			for _, err := range run(&rep) {
				failed = append(failed, err.Error())
			}
			continue
		}
		sc, ok := all[strings.TrimSpace(id)]
		if !ok {
			return rep.String(), fmt.Errorf("unknown scenario %q", id)
		}
		results[sc.id] = map[string]fanout{}
		var rows []fanout
		switch sc.id {
		case "relay":
			b.logf("%s: without a relay", sc.title)
			direct := b.runFanout(sc, "xdsd", nil)
			direct.impl = "xdsd, clients direct"
			b.logf("%s: through a relay", sc.title)
			relayed := b.runFanout(sc, "xdsd", func() (*server, func(), error) {
				o, err := b.startServer("xdsd")
				if err != nil {
					return nil, nil, err
				}
				if err := o.post("/setup", sc.setup, nil); err != nil {
					o.stop()
					return nil, nil, err
				}
				return o, o.stop, nil
			})
			relayed.impl = "xdsd, clients through a relay"
			rows = []fanout{direct, relayed}
			writeRelay(&rep, sc, rows)
		case "r":
			rows = b.runReplicas(sc)
			writeReplicas(&rep, sc, rows)
		case "g":
			for _, impl := range filter(sc.impls, impls) {
				b.logf("%s: %s", sc.title, impl)
				rows = append(rows, b.runFanout(sc, impl, nil))
			}
			writeLarge(&rep, sc, rows)
		case "e":
			for _, impl := range filter(sc.impls, impls) {
				b.logf("%s: %s", sc.title, impl)
				rows = append(rows, b.runIdle(sc, impl))
			}
			writeIdle(&rep, sc, rows)
		default:
			for _, impl := range filter(sc.impls, impls) {
				b.logf("%s: %s", sc.title, impl)
				rows = append(rows, b.runFanout(sc, impl, nil))
			}
			writeFanout(&rep, sc, rows, b)
		}
		for _, r := range rows {
			results[sc.id][r.impl] = r
			if r.err != nil {
				failed = append(failed, fmt.Sprintf("%s/%s: %v", sc.id, r.impl, r.err))
			}
		}
	}
	writeTargets(&rep, results)
	if len(failed) > 0 {
		return rep.String(), fmt.Errorf("%d runs failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return rep.String(), nil
}

func filter(can, want []string) []string {
	var out []string
	for _, c := range can {
		for _, w := range want {
			if c == strings.TrimSpace(w) {
				out = append(out, c)
			}
		}
	}
	return out
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "model name") {
			if _, v, ok := strings.Cut(l, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func writeFanout(w io.Writer, sc scenario, rows []fanout, b *bench) {
	fmt.Fprintf(w, "## %s\n\n", sc.title)
	var xdsd fanout
	for _, r := range rows {
		if r.impl == "xdsd" {
			xdsd = r
		}
	}
	fmt.Fprintln(w, "| server | connect (ms) | fan-out p50 (ms) | p99 (ms) | all (ms) | all ÷ xdsd's | server CPU per change (ms) | CPU per response (µs) | bytes per stream | missing |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %v |||||||||\n", r.impl, r.err)
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.1f | %.1f | %s | %.1f | %.2f | %.0f | %d |\n",
			r.impl, r.connectMS, r.p50, r.p99, r.max, ratio(r.max, xdsd.max), r.cpuPerChange, r.cpuPerResponse, r.bytesPerStream, r.missing)
	}
	fmt.Fprintln(w)
}

func writeIdle(w io.Writer, sc scenario, rows []fanout) {
	fmt.Fprintf(w, "## %s\n\n", sc.title)
	var raw fanout
	for _, r := range rows {
		if r.impl == "raw" {
			raw = r
		}
	}
	fmt.Fprintln(w, "| server | connect (ms) | RSS per idle stream after GC (KiB) | of it: heap (KiB) | goroutine stacks (KiB) | ÷ raw gRPC's |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %v |||||\n", r.impl, r.err)
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.1f | %.1f | %s |\n", r.impl, r.connectMS, r.rssPerStream/1024,
			r.heapPerStream/1024, r.stackPerStream/1024, ratio(r.rssPerStream, raw.rssPerStream))
	}
	fmt.Fprintln(w)
}

// writeLarge reports a scenario of many streams: what holding them costs
// and how long one change takes to reach them all.
func writeLarge(w io.Writer, sc scenario, rows []fanout) {
	fmt.Fprintf(w, "## %s\n\n", sc.title)
	fmt.Fprintln(w, "| server | streams | connect (ms) | RSS after GC (MiB) | RSS per stream (KiB) | heap / stacks per stream (KiB) | fan-out p50 (ms) | p99 (ms) | all (ms) | server CPU per change (ms) | missing |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %v ||||||||||\n", r.impl, r.err)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.1f | %.1f / %.1f | %.1f | %.1f | %.1f | %.1f | %d |\n", r.impl, r.streams, r.connectMS, r.rssMiB,
			r.rssPerStream/1024, r.heapPerStream/1024, r.stackPerStream/1024, r.p50, r.p99, r.max, r.cpuPerChange, r.missing)
	}
	fmt.Fprintln(w)
}

func writeRelay(w io.Writer, sc scenario, rows []fanout) {
	fmt.Fprintf(w, "## %s\n\n", sc.title)
	fmt.Fprintln(w, "| setup | origin's streams | origin CPU per change (ms) | fan-out p50 (ms) | all (ms) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %v ||||\n", r.impl, r.err)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.2f | %.1f | %.1f |\n", r.impl, r.streams, r.cpuPerChange, r.p50, r.max)
	}
	fmt.Fprintln(w)
}

func writeTargets(w io.Writer, res map[string]map[string]fanout) {
	type target struct{ what, got, goal string }
	var ts []target
	ok := func(cond bool) string {
		if cond {
			return "met"
		}
		return "NOT met"
	}
	for _, id := range []string{"a", "b", "c"} {
		r := res[id]
		x, s, l := r["xdsd"], r["gcp-snapshot"], r["gcp-linear"]
		if x.max > 0 && s.max > 0 {
			ts = append(ts, target{fmt.Sprintf("(%s) fan-out ≤ 1/10 of SnapshotCache", id), fmt.Sprintf("%.3f", x.max/s.max), ok(x.max*10 <= s.max)})
		}
		if x.max > 0 && l.max > 0 {
			ts = append(ts, target{fmt.Sprintf("(%s) fan-out ≤ 1/2 of LinearCache", id), fmt.Sprintf("%.3f", x.max/l.max), ok(x.max*2 <= l.max)})
		}
		if raw := r["raw"]; x.max > 0 && raw.max > 0 {
			// Throughput: responses per second of fan-out; xdsd ≥ 1/2 raw.
			ts = append(ts, target{fmt.Sprintf("(%s) push throughput ≥ 1/2 of raw gRPC", id), fmt.Sprintf("%.3f", raw.max/x.max), ok(raw.max*2 >= x.max)})
		}
	}
	if r := res["e"]; r["xdsd"].rssPerStream > 0 && r["raw"].rssPerStream > 0 {
		q := r["xdsd"].rssPerStream / r["raw"].rssPerStream
		ts = append(ts, target{"(e) memory per idle stream ≤ 1.5× raw gRPC's", fmt.Sprintf("%.2f", q), ok(q <= 1.5)})
	}
	if x := res["d"]["xdsd"]; x.bytesPerStream > 0 && x.encodedLen > 0 {
		q := x.bytesPerStream / float64(x.encodedLen)
		ts = append(ts, target{fmt.Sprintf("(d) bytes per client for a one-resource change (%.0f) within 2× the resource (%d)", x.bytesPerStream, x.encodedLen),
			fmt.Sprintf("%.2f", q), ok(q <= 2)})
	}
	if len(ts) == 0 {
		return
	}
	fmt.Fprintln(w, "## Targets\n\n| target | xdsd ÷ peer | verdict |\n|---|---:|---|")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s |\n", t.what, t.got, t.goal)
	}
	fmt.Fprintln(w)
}
