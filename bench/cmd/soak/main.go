// Command soak runs xdsd under sustained churn and abuse and samples what
// must stay flat: an `xdsd serve` origin and an `xdsd relay` in front of
// it, SotW and delta streams opening and closing with distinct and shared
// name sets (on both), a batch applied every second, the origin stopped
// and restarted every few minutes (the relay keeps serving), and abusive
// clients: NACKs with 1 MiB details, streams naming thousands of distinct
// resources, streams that never read. Every 10 s it samples each process's
// RSS, goroutines and open fds and the origin's apply-to-send p99 over the
// interval; at the end it writes the samples as CSV, a PNG plot, and a
// summary for BENCHMARKS.md.
//
//	go run ./cmd/soak -duration 20m -o soak
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	clusterURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	routeURL   = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	clusters   = 500
)

func main() {
	var (
		duration = flag.Duration("duration", 20*time.Minute, "how long to soak")
		every    = flag.Duration("sample", 10*time.Second, "sampling interval")
		flapping = flag.Duration("flap", 3*time.Minute, "stop the origin this often (for 10 s); 0: never")
		workers  = flag.Int("workers", 16, "churning stream workers, per transport")
		out      = flag.String("o", "soak", "output prefix: PREFIX.csv, PREFIX.png, PREFIX.txt")
	)
	flag.Parse()
	if err := run(*duration, *every, *flapping, *workers, *out); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// proc is one xdsd process, restartable on the same ports.
type proc struct {
	name        string
	args        []string
	xds, admin  string
	mu          sync.Mutex
	cmd         *exec.Cmd
	restarts    int
	binary, dir string
}

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	args := append(append([]string{}, p.args...), "--xds-addr", p.xds, "--admin-addr", p.admin, "--log-level", "error")
	cmd := exec.Command(p.binary, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.admin + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become ready", p.name)
}

func (p *proc) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	p.cmd = nil
}

// sample is one row of the output.
type sample struct {
	at                   time.Duration
	rss                  [2]float64 // MiB: origin, relay
	goroutines, fds      [2]float64
	p99                  float64 // ms, the origin's apply-to-send over the interval
	streamsOpened, nacks int64
}

func run(duration, every, flapping time.Duration, workers int, out string) error {
	dir, err := os.MkdirTemp("", "soak")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "xdsd")
	// Built in the xdsd module itself (bench replaces it with ..), with
	// that module's dependencies.
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/xdsd/xdsd").Output()
	if err != nil {
		return fmt.Errorf("finding the xdsd module: %w", err)
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/xdsd")
	build.Dir = strings.TrimSpace(string(root))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building xdsd: %w", err)
	}
	origin := &proc{name: "origin", binary: bin, dir: dir, xds: freePort(), admin: freePort(),
		args: []string{"serve", "--store", "bolt:" + filepath.Join(dir, "soak.db"), "--history", "200"}}
	if err := origin.start(); err != nil {
		return err
	}
	defer origin.stop()
	if err := applyBatch(origin.admin, 0, clusters); err != nil {
		return err
	}
	relay := &proc{name: "relay", binary: bin, dir: dir, xds: freePort(), admin: freePort(), args: []string{"relay", "--upstream", origin.xds}}
	if err := relay.start(); err != nil {
		return err
	}
	defer relay.stop()

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var (
		wg     sync.WaitGroup
		opened atomic.Int64
		nacks  atomic.Int64
		down   atomic.Bool
	)
	conns := map[string]*grpc.ClientConn{}
	for _, addr := range []string{origin.xds, relay.xds} {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer c.Close()
		conns[addr] = c
	}
	// Applies: a batch every second, ten clusters changed.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for step := 1; ; step++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !down.Load() {
				applyBatch(origin.admin, step, 10)
			}
		}
	}()
	// Churn: SotW and delta streams, on the origin and on the relay.
	for i := 0; i < workers; i++ {
		for _, delta := range []bool{false, true} {
			wg.Add(1)
			go func(i int, delta bool) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(i)*2 + map[bool]int64{false: 0, true: 1}[delta]))
				for ctx.Err() == nil {
					conn := conns[origin.xds]
					if rng.Intn(2) == 0 {
						conn = conns[relay.xds]
					}
					names := sharedNames(rng.Intn(4))
					if rng.Intn(2) == 0 {
						names = distinctNames(rng, 20+rng.Intn(200))
					}
					hold := time.Duration(500+rng.Intn(3000)) * time.Millisecond
					opened.Add(1)
					churnOnce(ctx, conn, delta, names, hold, rng.Intn(10) == 0, &nacks)
				}
			}(i, delta)
		}
	}
	// Abuse, every few seconds, on the origin and the relay in turn.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(99))
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			conn := conns[origin.xds]
			if i%2 == 1 {
				conn = conns[relay.xds]
			}
			switch i % 3 {
			case 0: // a NACK flood with 1 MiB details
				abuseNacks(ctx, conn, &nacks)
			case 1: // thousands of distinct names, then gone
				churnOnce(ctx, conn, false, distinctNames(rng, 5000), 2*time.Second, false, &nacks)
			case 2: // a stream that subscribes and never reads
				stuck(ctx, conn, 10*time.Second)
			}
		}
	}()
	// The origin flaps: stopped for 10 s, restarted on the same ports.
	if flapping > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(flapping)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				down.Store(true)
				origin.stop()
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
				}
				if err := origin.start(); err != nil {
					fmt.Fprintln(os.Stderr, "soak: restarting the origin:", err)
				}
				origin.restarts++
				down.Store(false)
			}
		}()
	}
	// Sampling.
	var samples []sample
	start := time.Now()
	var lastHist *dto.Histogram
	t := time.NewTicker(every)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
		}
		s := sample{at: time.Since(start), streamsOpened: opened.Load(), nacks: nacks.Load()}
		for i, p := range []*proc{origin, relay} {
			fams := scrape(p.admin)
			s.rss[i] = gauge(fams, "process_resident_memory_bytes") / (1 << 20)
			s.goroutines[i] = gauge(fams, "go_goroutines")
			s.fds[i] = gauge(fams, "process_open_fds")
			if i == 0 {
				h := histogram(fams, "xdsd_apply_to_send_seconds")
				s.p99 = quantile(lastHist, h, 0.99) * 1000
				lastHist = h
			}
		}
		samples = append(samples, s)
		fmt.Fprintf(os.Stderr, "%6s origin rss %.0f MiB gor %.0f fds %.0f | relay rss %.0f MiB gor %.0f fds %.0f | p99 %.1f ms | streams %d\n",
			s.at.Round(time.Second), s.rss[0], s.goroutines[0], s.fds[0], s.rss[1], s.goroutines[1], s.fds[1], s.p99, s.streamsOpened)
	}
	cancel()
	wg.Wait()
	if err := writeCSV(out+".csv", samples); err != nil {
		return err
	}
	if err := plotSamples(out+".png", samples); err != nil {
		return err
	}
	summary := summarize(samples, duration, origin.restarts)
	os.Stdout.WriteString(summary)
	return os.WriteFile(out+".txt", []byte(summary), 0o644)
}

func clusterDoc(i, step int) string {
	return fmt.Sprintf("\"@type\": %s\nname: c%d\ntype: EDS\neds_cluster_config: {eds_config: {ads: {}}}\nalt_stat_name: s%d\n", clusterURL, i, step)
}

// applyBatch applies n clusters (all of them at step 0), and a route with
// TP2 variants.
func applyBatch(admin string, step, n int) error {
	var b strings.Builder
	rng := rand.New(rand.NewSource(int64(step)))
	for j := 0; j < n; j++ {
		i := j
		if step > 0 {
			i = rng.Intn(clusters)
		}
		b.WriteString(clusterDoc(i, step))
		b.WriteString("---\n")
	}
	for _, env := range []string{"prod", "test"} {
		fmt.Fprintf(&b, "name: r\nconstraints: env=%s\nresource:\n  \"@type\": %s\n  virtual_hosts: [{name: v%d, domains: ['*']}]\n---\n", env, routeURL, step)
	}
	resp, err := http.Post("http://"+admin+"/v1/apply", "application/yaml", strings.NewReader(b.String()))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("apply: %s", resp.Status)
	}
	return nil
}

func sharedNames(k int) []string {
	out := make([]string, 50)
	for i := range out {
		out[i] = "c" + strconv.Itoa(k*50+i)
	}
	return out
}

func distinctNames(rng *rand.Rand, n int) []string {
	out := make([]string, n)
	base := rng.Int63()
	for i := range out {
		if i%2 == 0 {
			out[i] = "c" + strconv.Itoa(rng.Intn(clusters))
		} else {
			out[i] = fmt.Sprintf("missing-%x-%d", base, i)
		}
	}
	return out
}

func node(env string) *corev3.Node {
	md, _ := structpb.NewStruct(map[string]any{"env": env})
	return &corev3.Node{Id: "soak", Metadata: md}
}

// churnOnce opens a stream, subscribes, ACKs (or NACKs, when nack) what
// comes for hold, and closes.
func churnOnce(ctx context.Context, conn *grpc.ClientConn, delta bool, names []string, hold time.Duration, nack bool, nacks *atomic.Int64) {
	ctx, cancel := context.WithTimeout(ctx, hold)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	if delta {
		s, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			return
		}
		s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node("prod"), TypeUrl: clusterURL, ResourceNamesSubscribe: names})
		s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: routeURL, ResourceNamesSubscribe: []string{"r"}})
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce}
			if nack {
				req.ErrorDetail = &status.Status{Code: 3, Message: "soak: rejected"}
				nacks.Add(1)
			}
			s.Send(req)
		}
	}
	s, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		return
	}
	s.Send(&discoveryv3.DiscoveryRequest{Node: node("test"), TypeUrl: clusterURL, ResourceNames: names})
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: routeURL, ResourceNames: []string{"r"}})
	for {
		r, err := s.Recv()
		if err != nil {
			return
		}
		req := &discoveryv3.DiscoveryRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce, VersionInfo: r.VersionInfo, ResourceNames: names}
		if r.TypeUrl == routeURL {
			req.ResourceNames = []string{"r"}
		}
		if nack {
			req.ErrorDetail = &status.Status{Code: 3, Message: "soak: rejected"}
			nacks.Add(1)
		}
		s.Send(req)
	}
}

// abuseNacks NACKs every response with a 1 MiB detail, for a while.
func abuseNacks(ctx context.Context, conn *grpc.ClientConn, nacks *atomic.Int64) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx, grpc.MaxCallSendMsgSize(8<<20))
	if err != nil {
		return
	}
	big := string(bytes.Repeat([]byte("x"), 1<<20))
	s.Send(&discoveryv3.DiscoveryRequest{Node: node("prod"), TypeUrl: clusterURL, ResourceNames: sharedNames(0)})
	for i := 0; i < 50; i++ {
		r, err := s.Recv()
		if err != nil {
			return
		}
		s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: clusterURL, ResourceNames: sharedNames(0), ResponseNonce: r.Nonce,
			ErrorDetail: &status.Status{Code: 3, Message: big}})
		nacks.Add(1)
	}
}

// stuck subscribes to everything and never reads, for d.
func stuck(ctx context.Context, conn *grpc.ClientConn, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return
	}
	s.Send(&discoveryv3.DiscoveryRequest{Node: node("prod"), TypeUrl: clusterURL})
	<-ctx.Done()
}

func scrape(admin string) map[string]*dto.MetricFamily {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		return nil
	}
	return fams
}

func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return math.NaN()
	}
	m := f.Metric[0]
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return math.NaN()
}

func histogram(fams map[string]*dto.MetricFamily, name string) *dto.Histogram {
	f := fams[name]
	if f == nil || len(f.Metric) == 0 {
		return nil
	}
	return f.Metric[0].Histogram
}

// quantile estimates quantile q of what was observed between two scrapes
// of a cumulative histogram (the upper bound of the bucket it falls in).
// After a restart (counts went down) the later scrape stands alone.
func quantile(prev, cur *dto.Histogram, q float64) float64 {
	if cur == nil {
		return math.NaN()
	}
	base := func(i int) uint64 { return 0 }
	if prev != nil && prev.GetSampleCount() <= cur.GetSampleCount() && len(prev.Bucket) == len(cur.Bucket) {
		base = func(i int) uint64 { return prev.Bucket[i].GetCumulativeCount() }
	}
	var total uint64
	if n := len(cur.Bucket); n > 0 {
		total = cur.Bucket[n-1].GetCumulativeCount() - base(n-1)
	}
	if total == 0 {
		return math.NaN()
	}
	want := uint64(math.Ceil(q * float64(total)))
	for i, b := range cur.Bucket {
		if b.GetCumulativeCount()-base(i) >= want {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

func writeCSV(path string, ss []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"seconds", "origin_rss_mib", "relay_rss_mib", "origin_goroutines", "relay_goroutines", "origin_fds", "relay_fds", "apply_to_send_p99_ms", "streams_opened", "nacks"})
	for _, s := range ss {
		w.Write([]string{fmt.Sprint(int(s.at.Seconds())), f1(s.rss[0]), f1(s.rss[1]), f1(s.goroutines[0]), f1(s.goroutines[1]),
			f1(s.fds[0]), f1(s.fds[1]), f1(s.p99), fmt.Sprint(s.streamsOpened), fmt.Sprint(s.nacks)})
	}
	w.Flush()
	return w.Error()
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// summarize gives, per series, the first and last samples of the run's
// second half against its first, and the extremes.
func summarize(ss []sample, d time.Duration, restarts int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %v, %d samples, origin restarted %d times; %d streams opened, %d NACKs sent\n",
		d, len(ss), restarts, ss[len(ss)-1].streamsOpened, ss[len(ss)-1].nacks)
	series := []struct {
		name string
		get  func(sample) float64
	}{
		{"origin RSS (MiB)", func(s sample) float64 { return s.rss[0] }},
		{"relay RSS (MiB)", func(s sample) float64 { return s.rss[1] }},
		{"origin goroutines", func(s sample) float64 { return s.goroutines[0] }},
		{"relay goroutines", func(s sample) float64 { return s.goroutines[1] }},
		{"origin open fds", func(s sample) float64 { return s.fds[0] }},
		{"relay open fds", func(s sample) float64 { return s.fds[1] }},
		{"apply-to-send p99 (ms)", func(s sample) float64 { return s.p99 }},
	}
	fmt.Fprintf(&b, "%-24s %10s %10s %10s %10s\n", "series", "median 1st", "median 2nd", "min", "max")
	half := len(ss) / 2
	for _, se := range series {
		var all, first, second []float64
		for i, s := range ss {
			v := se.get(s)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			all = append(all, v)
			if i < half {
				first = append(first, v)
			} else {
				second = append(second, v)
			}
		}
		sort.Float64s(all)
		if len(all) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-24s %10.1f %10.1f %10.1f %10.1f\n", se.name, median(first), median(second), all[0], all[len(all)-1])
	}
	return b.String()
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
