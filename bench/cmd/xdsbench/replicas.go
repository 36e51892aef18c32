package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// Scenario (r): the time from an apply until every stream holds the change,
// with the streams on one xdsd replica or split over two replicas that
// share their state through etcd. The change is applied through the first
// replica; the second learns it from its etcd watch, so its streams see the
// commit, the watch and its own fan-out.

// etcdServer is a one-member etcd started for the scenario.
type etcdServer struct {
	client string // host:port
	cmd    *exec.Cmd
	exited chan struct{}
}

// startEtcd starts the etcd binary the tests use ($ETCD, else etcd built
// once from its Go module by etcdtest.BuildBinary and cached) with its data
// under b.dir and waits until it is healthy.
func (b *bench) startEtcd() (*etcdServer, error) {
	bin, err := etcdtest.BuildBinary(context.Background(), b.logf)
	if err != nil {
		return nil, fmt.Errorf("scenario r needs etcd: %w", err)
	}
	client, err := freeAddr()
	if err != nil {
		return nil, err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(b.dir, "etcd")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--name", "bench", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "bench=http://"+peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", filepath.Join(dir, "etcd.log"))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	e := &etcdServer{client: client, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(e.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if healthy(client) {
			return e, nil
		}
		select {
		case <-e.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			return nil, fmt.Errorf("etcd exited at start: %s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("etcd at %s not healthy after 60s", client)
		}
	}
}

// healthy asks etcd's /health endpoint.
func healthy(client string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + client + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`)
}

func (e *etcdServer) stop() {
	e.cmd.Process.Kill()
	<-e.exited
}

// url is the --store value for a state under prefix.
func (e *etcdServer) url(prefix string) string { return "etcd://" + e.client + "/" + prefix }

// cpuNanos is the etcd process's CPU time so far (utime+stime from
// /proc/PID/stat; 0 when unreadable).
func (e *etcdServer) cpuNanos() int64 { return procCPU(e.cmd.Process.Pid) }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// runReplicas runs scenario r: one replica in memory (the reference), one
// replica on etcd, two replicas on etcd with half the streams each.
func (b *bench) runReplicas(sc scenario) []fanout {
	b.logf("%s: one replica, in-memory store", sc.title)
	mem := b.runFanout(sc, "xdsd", nil)
	mem.impl = "1 replica, in-memory store (reference)"
	e, err := b.startEtcd()
	if err != nil {
		return []fanout{mem, {impl: "replicas on etcd", err: err}}
	}
	defer e.stop()
	b.logf("%s: one replica on etcd", sc.title)
	one := sc
	one.serverArgs = []string{"--store", e.url("one")}
	single := b.runFanout(one, "xdsd", nil)
	single.impl = "1 replica on etcd"
	b.logf("%s: two replicas on etcd", sc.title)
	two := fanout{impl: "2 replicas on etcd"}
	two.err = b.fanoutReplicas(&two, sc, e)
	return []fanout{mem, single, two}
}

// fanoutReplicas measures sc over two replicas sharing e, each with half
// the streams; changes are applied through the first.
func (b *bench) fanoutReplicas(f *fanout, sc scenario, e *etcdServer) error {
	url := e.url("two")
	var srvs [2]*server
	for i := range srvs {
		s, err := b.startServer("xdsd", "--store", url)
		if err != nil {
			return err
		}
		defer s.stop()
		srvs[i] = s
	}
	// Setting up through both: the second finds the state the first wrote
	// (its batch changes nothing) and returns once it serves it.
	for _, s := range srvs {
		if err := s.post("/setup", sc.setup, nil); err != nil {
			return err
		}
	}
	half := sc
	half.connect.Streams = sc.connect.Streams / 2
	var lgs [2]*loadgen
	var errs [2]error
	var connected [2]fanout
	var wg sync.WaitGroup
	for i := range srvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lgs[i], errs[i] = b.connect(&connected[i], half, srvs[i])
		}()
	}
	wg.Wait()
	for i := range lgs {
		if lgs[i] != nil {
			defer lgs[i].stop()
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	f.connectMS = max(connected[0].connectMS, connected[1].connectMS)
	for i, s := range srvs {
		st, err := s.stats()
		if err != nil {
			return err
		}
		if i == 0 {
			f.streams = st.Streams
		}
	}
	var p50s, p99s, maxs, maxA, maxB, cpus []float64
	etcdBefore := e.cpuNanos()
	for round := 1; round <= b.rounds; round++ {
		marker := fmt.Sprintf(control.MarkerFormat, round)
		var before [2]control.ServerStats
		for i, s := range srvs {
			var err error
			if before[i], err = s.stats(); err != nil {
				return err
			}
			if err := lgs[i].send(control.Command{Cmd: "expect", Marker: marker, TimeoutMS: 120000, Ack: true}); err != nil {
				return err
			}
			if ev, err := lgs[i].next(); err != nil || ev.Event != "expecting" {
				return fmt.Errorf("expect not acknowledged: %v %v", ev.Event, err)
			}
		}
		t0 := time.Now().UnixNano()
		for _, lg := range lgs {
			if err := lg.send(control.Command{Cmd: "t0", T0: t0}); err != nil {
				return err
			}
		}
		if err := srvs[0].post("/change", control.Change{Round: round, Count: sc.change}, nil); err != nil {
			return err
		}
		var evs [2]control.Event
		var cpu float64
		for i, lg := range lgs {
			var err error
			if evs[i], err = lg.next(); err != nil {
				return err
			}
			after, err := srvs[i].stats()
			if err != nil {
				return err
			}
			cpu += float64(after.CPUNanos - before[i].CPUNanos)
			f.missing += evs[i].Missing
		}
		// The percentiles of the whole cannot be had from the halves'; the
		// larger of the two is an upper bound of each.
		p50s = append(p50s, max(evs[0].P50MS, evs[1].P50MS))
		p99s = append(p99s, max(evs[0].P99MS, evs[1].P99MS))
		maxs = append(maxs, max(evs[0].MaxMS, evs[1].MaxMS))
		maxA, maxB = append(maxA, evs[0].MaxMS), append(maxB, evs[1].MaxMS)
		cpus = append(cpus, cpu/1e6)
	}
	f.p50, f.p99, f.max = median(p50s), median(p99s), median(maxs)
	f.maxApplying, f.maxFollowing = median(maxA), median(maxB)
	f.cpuPerChange = median(cpus)
	f.etcdCPU = float64(e.cpuNanos()-etcdBefore) / 1e6 / float64(b.rounds)
	return nil
}

// procCPU reads a process's utime+stime from /proc/PID/stat.
func procCPU(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after its ')'.
	_, rest, ok := strings.Cut(string(data), ") ")
	if !ok {
		return 0
	}
	fs := strings.Fields(rest)
	if len(fs) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(fs[11], &ut)
	fmt.Sscan(fs[12], &st)
	// Clock ticks: 100 per second on Linux (USER_HZ).
	return (ut + st) * int64(time.Second/100)
}

func writeReplicas(w io.Writer, sc scenario, rows []fanout) {
	fmt.Fprintf(w, "## %s\n\n", sc.title)
	fmt.Fprintln(w, "| setup | streams per replica | connect (ms) | fan-out p50 (ms) | p99 (ms) | all (ms) | all: applying replica / other (ms) | replicas' CPU per change (ms) | etcd CPU per change (ms) | missing |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(w, "| %s | error: %v |||||||||\n", r.impl, r.err)
			continue
		}
		split := "–"
		if r.maxFollowing > 0 {
			split = fmt.Sprintf("%.1f / %.1f", r.maxApplying, r.maxFollowing)
		}
		etcdCPU := "–"
		if r.etcdCPU > 0 {
			etcdCPU = fmt.Sprintf("%.1f", r.etcdCPU)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %.1f | %.1f | %s | %.1f | %s | %d |\n",
			r.impl, r.streams, r.connectMS, r.p50, r.p99, r.max, split, r.cpuPerChange, etcdCPU, r.missing)
	}
	fmt.Fprintln(w)
}
