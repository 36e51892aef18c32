package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/bench/pki"
)

// The product-path scenarios: h (serve + apply beside the embedded
// server on bolt), i (the same over mTLS with a policy, beside raw gRPC
// over mTLS), apply (issue 26: apply's wall time beside many streams) and
// tiers (an origin under two levels of relays).

// product maps the product-path scenarios' ids to their runs, which
// write their report to w.
func (b *bench) product() map[string]func(w io.Writer) []error {
	return map[string]func(io.Writer) []error{"h": b.runH, "i": b.runI, "apply": b.runApplyWall, "tiers": b.runTiers, "m": b.runMillion}
}

func (b *bench) n(full, quick int) int {
	if b.quick {
		return quick
	}
	return full
}

func clusterNames(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf(control.ClusterFormat, i)
	}
	return out
}

// loopback are serve's and relay's flags for free loopback ports; every
// other flag is left to its default, as a user runs them.
var loopback = []string{"--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}

// startServe runs `xdsd serve` on a new bolt file and applies clusters to
// it with `xdsd apply`, as a user sets it up.
func (b *bench) startServe(tag string, clusters []string, extra ...string) (*proc, error) {
	args := append([]string{"serve", "--store", "bolt:" + filepath.Join(b.dir, tag+".db")}, loopback...)
	p, err := b.startXdsd(tag, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	if len(clusters) > 0 {
		file, err := b.writeFile(tag+"-setup.yaml", clustersYAML(clusters, "initial"))
		if err == nil {
			_, err = b.apply(p, file)
		}
		if err != nil {
			p.stop()
			return nil, err
		}
	}
	return p, nil
}

// serveArm changes cluster name on p with `xdsd apply` of a one-document
// YAML file, written before the round starts, with applyArgs if any.
func (b *bench) serveArm(name string, p *proc, cluster string, offset, rounds int, applyArgs ...string) (*arm, error) {
	files := map[int]string{}
	for r := offset + 1; r <= offset+rounds; r++ {
		f, err := b.writeFile(fmt.Sprintf("%s-%s-%d.yaml", p.name, cluster, r), clustersYAML([]string{cluster}, fmt.Sprintf(control.MarkerFormat, r)))
		if err != nil {
			return nil, err
		}
		files[r] = f
	}
	a := &arm{name: name, offset: offset}
	timing := os.Getenv("XDSBENCH_APPLY_TIMING") != ""
	if timing && p.bin == b.xdsdPath {
		// Where each apply's time went, step by step (xdsd apply
		// --timing; an older build compared with may not have it).
		applyArgs = append(applyArgs, "--timing")
	}
	a.change = func(round int) (time.Duration, error) {
		if len(applyArgs) > 0 {
			took, out, err := b.xdsdCmd(p, append(append([]string{"apply"}, applyArgs...), "-f", files[round])...)
			a.addTiming(took, b.lastCmdCPU, out)
			return took, err
		}
		took, err := b.apply(p, files[round])
		if timing {
			a.addTiming(took, b.lastCmdCPU, "")
		}
		return took, err
	}
	a.cpu = func() int64 { return procCPUNanos(p.pid()) }
	return a, nil
}

// controlArm changes cluster c-0 on a benchserver through its control
// API, as the other scenarios do.
func controlArm(name string, s *server) *arm {
	return &arm{name: name,
		change: func(round int) (time.Duration, error) {
			start := time.Now()
			err := s.post("/change", control.Change{Round: round, Count: 1}, nil)
			return time.Since(start), err
		},
		cpu: func() int64 { return procCPUNanos(s.pid) },
	}
}

// runH is scenario (h): xdsd serve changed by xdsd apply, beside the
// embedded server on bolt changed through the control API.
func (b *bench) runH(w io.Writer) []error {
	streams, clusters := b.n(5000, 50), 100
	title := fmt.Sprintf("(h) the product path: `xdsd serve` (bolt) changed by `xdsd apply`, beside the embedded server on bolt; %d SotW streams × %d clusters, change 1", streams, clusters)
	b.logf("%s", title)
	names := clusterNames(clusters)
	serve, err := b.startServe("serve-h", names)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer serve.stop()
	emb, err := b.startServer("xdsd", "--store", "bolt:"+filepath.Join(b.dir, "embedded-h.db"))
	if err != nil {
		return b.failed(w, title, err)
	}
	defer emb.stop()
	if err := emb.post("/setup", control.Setup{Clusters: clusters}, nil); err != nil {
		return b.failed(w, title, err)
	}
	s, err := b.serveArm("xdsd serve + xdsd apply", serve, names[0], 0, b.rounds)
	if err != nil {
		return b.failed(w, title, err)
	}
	e := controlArm("embedded xdsd on bolt", emb)
	arms := []*arm{s, e}
	defer func() { closeArms(arms) }()
	conns := []struct {
		a    *arm
		addr string
	}{{s, serve.xds}, {e, emb.xds}}
	if before := os.Getenv("XDSBENCH_XDSD_BEFORE"); before != "" {
		// Another build of xdsd (a fix's parent) takes the same rounds by
		// turns: a before-and-after from the same minutes.
		old, err := b.startXdsdBin(before, "serve-h-before", append([]string{"serve", "--store", "bolt:" + filepath.Join(b.dir, "serve-h-before.db")}, loopback...)...)
		if err != nil {
			return b.failed(w, title, err)
		}
		defer old.stop()
		setup, err := b.writeFile("serve-h-before-setup.yaml", clustersYAML(names, "initial"))
		if err == nil {
			_, err = b.apply(old, setup)
		}
		if err != nil {
			return b.failed(w, title, err)
		}
		o, err := b.serveArm("xdsd serve + xdsd apply, "+filepath.Base(before), old, names[0], 0, b.rounds)
		if err != nil {
			return b.failed(w, title, err)
		}
		arms = append(arms, o)
		conns = append(conns, struct {
			a    *arm
			addr string
		}{o, old.xds})
	}
	for _, c := range conns {
		if err := b.connectArm(c.a, control.Command{Addr: c.addr, Streams: streams, Names: names}); err != nil {
			return b.failed(w, title, err)
		}
	}
	done := b.profile(map[string]string{"serve-h": serve.admin, "embedded-h": emb.control})
	load := loadAvg()
	b.runTurns(title, arms, b.rounds)
	done()
	writeArmsAt(w, title, arms, load)
	writeRatio(w, s, e, 1.2)
	return armErrs("h", arms)
}

// runI is scenario (i): (h) over mTLS with a policy and admin tokens,
// beside the raw-gRPC baseline over mTLS.
func (b *bench) runI(w io.Writer) []error {
	streams, clusters := b.n(5000, 50), 100
	title := fmt.Sprintf("(i) over mTLS with a policy: `xdsd serve` (bolt) changed by `xdsd apply`, beside raw gRPC over mTLS; %d SotW streams × %d clusters, change 1", streams, clusters)
	b.logf("%s", title)
	names := clusterNames(clusters)
	f, err := pki.Write(b.dir, "spiffe://bench.xdsd/ns/load/sa/loadgen")
	if err != nil {
		return b.failed(w, title, err)
	}
	policy, err := b.writeFile("policy.yaml", `rules:
# The load generator's workloads see the bench's clusters, and nothing else.
- clients: ["spiffe://bench.xdsd/ns/load/*"]
  types: [cds]
  names: ["c-*"]
`)
	if err != nil {
		return b.failed(w, title, err)
	}
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tokens, err := b.writeFile("tokens", token+" write bench\n")
	if err != nil {
		return b.failed(w, title, err)
	}
	tokenFile, err := b.writeFile("bench.token", token+"\n")
	if err != nil {
		return b.failed(w, title, err)
	}
	serve, err := b.startXdsd("serve-i", append([]string{"serve", "--store", "bolt:" + filepath.Join(b.dir, "serve-i.db"),
		"--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--client-ca", f.CA, "--policy", policy, "--admin-token-file", tokens}, loopback...)...)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer serve.stop()
	serve.adminArgs = []string{"--admin", "https://" + serve.admin, "--ca-file", f.CA, "--token-file", tokenFile}
	setup, err := b.writeFile("serve-i-setup.yaml", clustersYAML(names, "initial"))
	if err == nil {
		_, err = b.apply(serve, setup)
	}
	if err != nil {
		return b.failed(w, title, err)
	}
	raw, err := b.startServer("raw", "--tls-cert", f.ServerCert, "--tls-key", f.ServerKey, "--client-ca", f.CA)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer raw.stop()
	if err := raw.post("/setup", control.Setup{Clusters: clusters}, nil); err != nil {
		return b.failed(w, title, err)
	}
	s, err := b.serveArm("xdsd serve + xdsd apply, mTLS + policy", serve, names[0], 0, b.rounds)
	if err != nil {
		return b.failed(w, title, err)
	}
	r := controlArm("raw gRPC, mTLS", raw)
	arms := []*arm{s, r}
	defer closeArms(arms)
	for _, c := range []struct {
		a    *arm
		addr string
	}{{s, serve.xds}, {r, raw.xds}} {
		if err := b.connectArm(c.a, control.Command{Addr: c.addr, Streams: streams, Names: names,
			TLSCA: f.CA, TLSCert: f.ClientCert, TLSKey: f.ClientKey}); err != nil {
			return b.failed(w, title, err)
		}
	}
	load := loadAvg()
	b.runTurns(title, arms, b.rounds)
	writeArmsAt(w, title, arms, load)
	writeRatio(w, s, r, 1.3)
	return armErrs("i", arms)
}

// runApplyWall is issue 26's figure: the wall time of a one-cluster
// `xdsd apply` with many idle streams connected, none subscribed to the
// cluster, then with some of them subscribed, beside the same apply on a
// server with no streams, by turns; and the original case, 2,000
// SotW streams × 100 clusters all subscribed to the changed one.
func (b *bench) runApplyWall(w io.Writer) []error {
	idle, hot, busy := b.n(100000, 200), b.n(1000, 20), b.n(2000, 20)
	title := fmt.Sprintf("(apply) issue 26: one-cluster `xdsd apply` wall time with %d idle streams, with %d of them subscribed, and with %d SotW streams × 100 clusters subscribed", idle, hot, busy)
	b.logf("%s", title)
	names := append(clusterNames(100), "hot")
	base, err := b.startServe("serve-apply-base", names)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer base.stop()
	loaded, err := b.startServe("serve-apply-loaded", names)
	if err != nil {
		return b.failed(w, title, err)
	}
	defer loaded.stop()

	var all []*arm
	defer func() { closeArms(all) }()
	phase := func(n int, baseName, loadedName, cluster string, lg *loadgen, streams int) (*arm, *arm, error) {
		off := (n - 1) * 1000
		a, err := b.serveArm(baseName, base, "hot", off, b.rounds)
		if err != nil {
			return nil, nil, err
		}
		l, err := b.serveArm(loadedName, loaded, cluster, off, b.rounds)
		if err != nil {
			return nil, nil, err
		}
		l.lg, l.streams = lg, streams
		b.runTurns(title, []*arm{a, l}, b.rounds)
		return a, l, nil
	}
	// Phase 1: idle streams, each on 10 clusters of its own choosing but
	// never on "hot".
	load := loadAvg()
	b.logf("%s: connecting %d idle streams", title, idle)
	idleArm := &arm{name: "idle"}
	if err := b.connectArm(idleArm, control.Command{Addr: loaded.xds, Streams: idle, Names: names[:10]}); err != nil {
		return b.failed(w, title, err)
	}
	all = append(all, idleArm)
	rss := vmRSSOf(loaded.pid())
	lgRSS := vmRSSOf(idleArm.lg.cmd.Process.Pid)
	a1, l1, err := phase(1, "no streams", fmt.Sprintf("%d idle streams, none subscribed", idle), "hot", nil, idle)
	if err != nil {
		return b.failed(w, title, err)
	}
	// Phase 2: and some streams subscribed to "hot"; the arm waits for
	// them to hold each change.
	hotArm := &arm{name: "hot"}
	if err := b.connectArm(hotArm, control.Command{Addr: loaded.xds, Streams: hot, Names: []string{"hot"}}); err != nil {
		return b.failed(w, title, err)
	}
	all = append(all, hotArm)
	a2, l2, err := phase(2, "no streams", fmt.Sprintf("%d idle streams + %d subscribed", idle, hot), "hot", hotArm.lg, idle+hot)
	if err != nil {
		return b.failed(w, title, err)
	}
	hotArm.lg.stop()
	idleArm.lg.stop()
	hotArm.lg, idleArm.lg = nil, nil
	// Phase 3: the first figure, 0.96 s before the fleet index.
	busyArm := &arm{name: "busy"}
	if err := b.connectArm(busyArm, control.Command{Addr: loaded.xds, Streams: busy, Names: names[:100]}); err != nil {
		return b.failed(w, title, err)
	}
	all = append(all, busyArm)
	a3, l3, err := phase(3, "no streams", fmt.Sprintf("%d SotW streams × 100 clusters, subscribed", busy), names[0], busyArm.lg, busy)
	if err != nil {
		return b.failed(w, title, err)
	}
	fmt.Fprintf(w, "## %s\n\n", title)
	fmt.Fprintf(w, "Two `xdsd serve` (bolt, default flags) take the same one-cluster applies by turns: one with no streams, one with the streams of each phase. This machine held %d idle streams with the server at %.0f MiB RSS and the load generator at %.0f MiB. Load average (1 min) at the start and the end: %s, %s.\n\n",
		idle, float64(rss)/(1<<20), float64(lgRSS)/(1<<20), load, loadAvg())
	fmt.Fprintln(w, "| phase | `xdsd apply` wall, no streams (ms) | `xdsd apply` wall, with the streams (ms) | more than with none (ms, median of the rounds' differences) | target | verdict | all subscribed streams hold it (ms) | server CPU per change, no streams / with them (ms) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---|---:|---:|")
	for _, p := range [][2]*arm{{a1, l1}, {a2, l2}, {a3, l3}} {
		a, l := p[0], p[1]
		if a.err != nil || l.err != nil {
			fmt.Fprintf(w, "| %s | error: %v %v |||||||\n", l.name, a.err, l.err)
			continue
		}
		var diff []float64
		for i := range min(len(a.wall), len(l.wall)) {
			diff = append(diff, l.wall[i]-a.wall[i])
		}
		target, ok := "≤ 50 ms more", "met"
		if median(diff) > 50 {
			ok = "NOT met"
		}
		if l == l3 {
			target, ok = "(0.96 s before the fleet index)", "–"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", l.name, spread(a.wall, "%.1f"), spread(l.wall, "%.1f"),
			spread(diff, "%.1f"), target, ok, spread(l.all, "%.1f"), spread(a.cpuMS, "%.1f")+" / "+spread(l.cpuMS, "%.1f"))
	}
	fmt.Fprintln(w)
	return append(armErrs("apply", []*arm{a1, l1, a2, l2, a3, l3}), armErrs("apply", all)...)
}

// tree is an origin (`xdsd serve`) under two levels of `xdsd relay`.
type tree struct {
	origin *proc
	relays []*proc // the middle level, then the leaves
	leaves []string
}

func (t *tree) stop() {
	for i := len(t.relays) - 1; i >= 0; i-- {
		t.relays[i].stop()
	}
	if t.origin != nil {
		t.origin.stop()
	}
}

// startTree starts an origin holding clusters, mid relays under it and
// leaves relays under each mid. Each relay has a node id of its own, as
// an operator names them (the default is one name for all).
func (b *bench) startTree(tag string, clusters []string, mid, leaves int) (*tree, error) {
	t := &tree{}
	var err error
	if t.origin, err = b.startServe(tag+"-origin", clusters); err != nil {
		return t, err
	}
	var mids []*proc
	for i := range mid {
		name := fmt.Sprintf("%s-relay-%d", tag, i)
		r, err := b.startXdsd(name, append([]string{"relay", "--upstream", t.origin.xds, "--node-id", name}, loopback...)...)
		if err != nil {
			return t, err
		}
		mids = append(mids, r)
		t.relays = append(t.relays, r)
	}
	for i := range mid * leaves {
		name := fmt.Sprintf("%s-leaf-%d", tag, i)
		r, err := b.startXdsd(name, append([]string{"relay", "--upstream", mids[i/leaves].xds, "--node-id", name}, loopback...)...)
		if err != nil {
			return t, err
		}
		t.relays = append(t.relays, r)
		t.leaves = append(t.leaves, r.xds)
	}
	return t, nil
}

// clientCount is how many clients a server's /v1/clients lists (-1 if
// unknown).
func clientCount(p *proc) int {
	resp, err := http.Get("http://" + p.admin + "/v1/clients")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var cs []json.RawMessage
	if json.NewDecoder(resp.Body).Decode(&cs) != nil {
		return -1
	}
	return len(cs)
}

// runTiers is issue 30's point 5: an origin, mid relays and leaf relays
// under them, with few and with many streams at the leaves; the origin's
// CPU per change must not follow the streams below.
func (b *bench) runTiers(w io.Writer) []error {
	mid, per := b.n(4, 2), 4
	if b.quick {
		per = 2
	}
	few, many := b.n(1000, 20), b.n(20000, 80)
	clusters := clusterNames(10)
	title := fmt.Sprintf("(tiers) an origin, %d relays and %d under them: %d and %d SotW streams × %d clusters at the leaves, change 1", mid, mid*per, few, many, len(clusters))
	b.logf("%s", title)
	var trees []*tree
	defer func() {
		for _, t := range trees {
			t.stop()
		}
	}()
	var arms []*arm
	defer func() { closeArms(arms) }()
	for _, n := range []int{few, many} {
		tag := fmt.Sprintf("tree-%d", n)
		t, err := b.startTree(tag, clusters, mid, per)
		trees = append(trees, t)
		if err != nil {
			return b.failed(w, title, err)
		}
		a, err := b.serveArm(fmt.Sprintf("%d streams at the leaves", n), t.origin, clusters[0], 0, b.rounds)
		if err != nil {
			return b.failed(w, title, err)
		}
		relays := t.relays
		a.extraCPU = func() int64 {
			var sum int64
			for _, r := range relays {
				sum += procCPUNanos(r.pid())
			}
			return sum
		}
		// Every leaf gets an equal share of the connections, of at most
		// 100 streams each (serve's and relay's default stream cap).
		perLeaf := (n + 100*len(t.leaves) - 1) / (100 * len(t.leaves))
		conns := len(t.leaves) * perLeaf
		if err := b.connectArm(a, control.Command{Addrs: t.leaves, Addr: t.leaves[0], Conns: conns, Streams: n, Names: clusters}); err != nil {
			return b.failed(w, title, err)
		}
		arms = append(arms, a)
	}
	load := loadAvg()
	b.runTurns(title, arms, b.rounds)
	fmt.Fprintf(w, "## %s\n\n", title)
	fmt.Fprintf(w, "Load average (1 min) at the start and the end of the rounds: %s, %s. ", load, loadAvg())
	fmt.Fprint(w, "Every server is the `xdsd` binary with default flags (relays: `xdsd relay --upstream ADDR --node-id NAME`, delta upstream); the origin is `xdsd serve` on bolt, changed by `xdsd apply`. The two trees are up together and take the rounds by turns. Median (min–max).")
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| streams at the leaves | origin's clients | every leaf stream holds the change (ms) | p50 (ms) | `xdsd apply` wall (ms) | origin CPU per change (ms) | all relays' CPU per change (ms) | missing |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, a := range arms {
		if a.err != nil {
			fmt.Fprintf(w, "| %d | error: %v |||||||\n", a.streams, a.err)
			continue
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %d |\n", a.streams, clientCount(trees[i].origin), spread(a.all, "%.1f"), spread(a.p50, "%.1f"),
			spread(a.wall, "%.1f"), spread(a.cpuMS, "%.1f"), spread(a.extraCPUMS, "%.1f"), a.missing)
	}
	fmt.Fprintln(w)
	if len(arms) == 2 && arms[0].err == nil && arms[1].err == nil {
		q := ratios(arms[1].cpuMS, arms[0].cpuMS)
		fmt.Fprintf(w, "Origin CPU per change, %d ÷ %d streams at the leaves: %s (median of the rounds' ratios, min–max), target ≤ 1.2×: **%s**.\n\n",
			many, few, spread(q, "%.2f×"), verdict(q, 1.2))
	}
	return armErrs("tiers", arms)
}

// profile, when $XDSBENCH_PROFILE_DIR is set, takes a CPU profile of each
// server (name → the address of its /debug/pprof/) for as long as the
// rounds take at most (3 s each), into that directory as NAME.cpu. The
// returned function waits for the profiles.
func (b *bench) profile(servers map[string]string) func() {
	dir := os.Getenv("XDSBENCH_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for name, addr := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			saveProfile(&server{control: addr}, fmt.Sprintf("/debug/pprof/profile?seconds=%d", 3*b.rounds), filepath.Join(dir, name+".cpu"))
		}()
	}
	return wg.Wait
}

// loadAvg is the machine's 1-minute load average, as /proc/loadavg has
// it ("?" when unreadable): other work on a shared machine shows in the
// timings, and the report says how much there was.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// failed reports a scenario that could not run.
func (b *bench) failed(w io.Writer, title string, err error) []error {
	fmt.Fprintf(w, "## %s\n\nerror: %v\n\n", title, err)
	return []error{err}
}

func closeArms(arms []*arm) {
	for _, a := range arms {
		a.close()
	}
}

func armErrs(id string, arms []*arm) []error {
	var out []error
	for _, a := range arms {
		if a.err != nil {
			out = append(out, fmt.Errorf("%s/%s: %w", id, a.name, a.err))
		}
	}
	return out
}

// vmRSSOf is a process's VmRSS in bytes (0 if unknown).
func vmRSSOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	var kb int64
	for l := range strings.SplitSeq(string(data), "\n") {
		if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}
