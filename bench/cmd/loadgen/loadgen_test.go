package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/bench/control"
	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 30 * time.Second

// xds is a real xdsd server on loopback.
type xds struct {
	t    *testing.T
	addr string
	st   *mem.Store
	srv  *origin.Server
}

func startServer(t *testing.T, opts ...grpc.ServerOption) *xds {
	t.Helper()
	st := mem.New()
	srv := origin.New(st, origin.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	g := grpc.NewServer(append(opts, protocol.ServerCodec())...)
	srv.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		g.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Close()
		g.Stop()
		<-serveDone
		st.Close()
	})
	return &xds{t: t, addr: lis.Addr().String(), st: st, srv: srv}
}

// clusters returns the YAML of clusters as control.Setup describes them,
// with variants TP2 variants each over key "v" when variants > 1.
func clusters(names []string, variants int, alt string) string {
	var b strings.Builder
	for _, n := range names {
		for v := range max(variants, 1) {
			b.WriteString("---\n")
			fmt.Fprintf(&b, "name: %q\n", n)
			if variants > 1 {
				fmt.Fprintf(&b, "constraints: \"v=%d\"\n", v)
			}
			fmt.Fprintf(&b, `resource:
  "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: %q
  type: EDS
  eds_cluster_config: {eds_config: {ads: {}}}
  alt_stat_name: %q
  metadata: {filter_metadata: {bench: {pad: %q, v: "%d"}}}
`, n, alt, strings.Repeat("x", 200), v)
		}
	}
	return b.String()
}

func (x *xds) apply(yaml string) int64 {
	x.t.Helper()
	docs, err := resource.Decode("bench.yaml", []byte(yaml))
	if err != nil {
		x.t.Fatal(err)
	}
	var b store.Batch
	for _, d := range docs {
		b.Puts = append(b.Puts, d.Variant)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := x.st.Apply(ctx, b)
	if err != nil {
		x.t.Fatal(err)
	}
	if err := x.srv.WaitRev(ctx, res.Rev); err != nil {
		x.t.Fatal(err)
	}
	return res.Rev
}

// waitAcked waits until n streams have ACKed revision rev.
func (x *xds) waitAcked(n int, rev int64) {
	x.t.Helper()
	want := fmt.Sprint(rev)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for {
		acked := 0
		for _, c := range x.srv.Streams() {
			for _, ts := range c.Types {
				if ts.AckedVersion == want && ts.AckedNonce == ts.SentNonce {
					acked++
				}
			}
		}
		if acked == n {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			x.t.Fatalf("%d of %d streams acked revision %d", acked, n, rev)
		}
	}
}

// lg is the load generator's core run in-process.
type lg struct {
	t      *testing.T
	in     *io.PipeWriter
	events chan control.Event
	done   chan error
	quit   bool
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func startLG(t *testing.T) *lg {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &lg{t: t, in: inW, events: make(chan control.Event, 16), done: make(chan error, 1)}
	go func() {
		err := run(context.Background(), inR, outW, logWriter{t})
		outW.Close()
		inR.Close()
		p.done <- err
	}()
	go func() {
		defer close(p.events)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var e control.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("bad event %q: %v", sc.Text(), err)
				continue
			}
			p.events <- e
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *lg) send(c control.Command) {
	p.t.Helper()
	b, _ := json.Marshal(c)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatal(err)
	}
}

func (p *lg) next() control.Event {
	p.t.Helper()
	select {
	case e, ok := <-p.events:
		if !ok {
			p.t.Fatal("load generator ended")
		}
		p.t.Logf("event %+v", e)
		return e
	case <-time.After(wait):
		p.t.Fatal("no event")
	}
	return control.Event{}
}

// stop quits the load generator and waits for it.
func (p *lg) stop() {
	if p.quit {
		return
	}
	p.quit = true
	p.send(control.Command{Cmd: "quit"})
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Errorf("run: %v", err)
		}
	case <-time.After(wait):
		p.t.Error("run did not end on quit")
	}
	p.in.Close()
	for e := range p.events {
		p.t.Errorf("unexpected event after quit: %+v", e)
	}
}

func names(format string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func TestConnectAndExpect(t *testing.T) {
	const (
		streams  = 50
		nclust   = 10
		variants = 2
	)
	plain := names(control.ClusterFormat, nclust)
	glob := names(control.GlobMemberFormat, nclust)
	params := []map[string]string{{"v": "0"}, {"v": "1"}}
	for _, tc := range []struct {
		name     string
		cmd      control.Command
		names    []string // the clusters the server holds
		variants int
	}{
		{"sotw names", control.Command{Names: plain}, plain, 1},
		{"sotw names over 3 conns", control.Command{Names: plain, Conns: 3}, plain, 1},
		{"sotw wildcard", control.Command{Wildcard: true, Expect: nclust}, plain, 1},
		{"delta names", control.Command{Delta: true, Names: plain}, plain, 1},
		{"delta wildcard", control.Command{Delta: true, Wildcard: true, Expect: nclust}, plain, 1},
		{"delta glob", control.Command{Delta: true, Glob: control.GlobURL, Expect: nclust}, glob, 1},
		{"sotw params", control.Command{Names: plain, Params: params}, plain, variants},
		{"delta params", control.Command{Delta: true, Names: plain, Params: params}, plain, variants},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := startServer(t)
			x.apply(clusters(tc.names, tc.variants, "initial"))
			p := startLG(t)
			c := tc.cmd
			c.Cmd, c.Addr, c.Streams = "connect", x.addr, streams
			p.send(c)
			e := p.next()
			if e.Event != "connected" || e.Streams != streams || e.MS <= 0 {
				t.Fatalf("connect: %+v", e)
			}
			for round := 1; round <= 2; round++ {
				marker := fmt.Sprintf(control.MarkerFormat, round)
				p.send(control.Command{Cmd: "expect", Marker: marker, T0: time.Now().UnixNano(), TimeoutMS: int(wait / time.Millisecond)})
				x.apply(clusters(tc.names[:3], tc.variants, marker))
				e = p.next()
				if e.Event != "received" || e.Missing != 0 || e.Streams != streams || e.Error != "" {
					t.Fatalf("round %d: %+v", round, e)
				}
				if e.Responses < streams || e.BytesPerStream < 200 {
					t.Errorf("round %d: %d responses, %.0f bytes per stream", round, e.Responses, e.BytesPerStream)
				}
				if !(0 < e.P50MS && e.P50MS <= e.P99MS && e.P99MS <= e.MaxMS && e.MaxMS < float64(wait/time.Millisecond)) {
					t.Errorf("round %d: latencies %v %v %v", round, e.P50MS, e.P99MS, e.MaxMS)
				}
			}
		})
	}
}

// An expect whose marker never comes times out with every stream missing;
// a second expect ends the first one early.
func TestExpectTimeoutAndCut(t *testing.T) {
	x := startServer(t)
	plain := names(control.ClusterFormat, 5)
	x.apply(clusters(plain, 1, "initial"))
	p := startLG(t)
	p.send(control.Command{Cmd: "connect", Addr: x.addr, Streams: 20, Names: plain})
	if e := p.next(); e.Event != "connected" {
		t.Fatalf("connect: %+v", e)
	}
	p.send(control.Command{Cmd: "expect", Marker: "never", TimeoutMS: 100})
	if e := p.next(); e.Event != "received" || e.Missing != 20 || e.Responses != 0 {
		t.Fatalf("timeout: %+v", e)
	}
	p.send(control.Command{Cmd: "expect", Marker: "never", TimeoutMS: int(wait / time.Millisecond)})
	p.send(control.Command{Cmd: "expect", Marker: "round-7-mark", TimeoutMS: int(wait / time.Millisecond)})
	if e := p.next(); e.Event != "received" || e.Missing != 20 {
		t.Fatalf("cut: %+v", e)
	}
	x.apply(clusters(plain[:1], 1, "round-7-mark"))
	if e := p.next(); e.Event != "received" || e.Missing != 0 || e.Responses != 20 {
		t.Fatalf("second: %+v", e)
	}
	// A new connect replaces the streams.
	p.send(control.Command{Cmd: "connect", Addr: x.addr, Streams: 7, Delta: true, Names: plain})
	if e := p.next(); e.Event != "connected" || e.Streams != 7 {
		t.Fatalf("reconnect: %+v", e)
	}
}

// A change that reaches the streams before the expect does (a race the
// driver cannot avoid) is still counted, from T0.
func TestChangeBeforeExpect(t *testing.T) {
	x := startServer(t)
	plain := names(control.ClusterFormat, 5)
	x.apply(clusters(plain, 1, "initial"))
	p := startLG(t)
	p.send(control.Command{Cmd: "connect", Addr: x.addr, Streams: 30, Names: plain})
	if e := p.next(); e.Event != "connected" {
		t.Fatalf("connect: %+v", e)
	}
	for round := 1; round <= 3; round++ {
		marker := fmt.Sprintf(control.MarkerFormat, round)
		t0 := time.Now().UnixNano()
		rev := x.apply(clusters(plain[:2], 1, marker))
		if round > 1 {
			x.waitAcked(30, rev) // every stream has it before the expect
		}
		p.send(control.Command{Cmd: "expect", Marker: marker, T0: t0, TimeoutMS: int(wait / time.Millisecond)})
		e := p.next()
		if e.Event != "received" || e.Missing != 0 || e.Responses != 30 || e.P50MS <= 0 {
			t.Fatalf("round %d: %+v", round, e)
		}
	}
	// A marker that came before T0 does not count.
	p.send(control.Command{Cmd: "expect", Marker: fmt.Sprintf(control.MarkerFormat, 3), T0: time.Now().UnixNano(), TimeoutMS: 50})
	if e := p.next(); e.Event != "received" || e.Missing != 30 || e.Responses != 0 {
		t.Fatalf("stale: %+v", e)
	}
}

func TestMarkerRound(t *testing.T) {
	for _, tc := range []struct {
		m    string
		want int
	}{{"round-1-mark", 1}, {"round-123-mark", 123}, {"round-0-mark", 0}, {"round-01-mark", 0}, {"round--mark", 0}, {"x", 0}, {"round-1-markx", 0}} {
		if got, ok := markerRound(tc.m); got != tc.want || ok != (tc.want > 0) {
			t.Errorf("markerRound(%q) = %d, %v", tc.m, got, ok)
		}
	}
	if got := maxMarkerRound([]byte("..round-3-mark..round-12-mark..round-99-marx..round-7-mark..round-")); got != 12 {
		t.Errorf("maxMarkerRound = %d", got)
	}
	if got := maxMarkerRound([]byte("initial")); got != 0 {
		t.Errorf("maxMarkerRound = %d", got)
	}
}

func TestErrors(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	p := startLG(t)
	p.send(control.Command{Cmd: "expect", Marker: "m"})
	if e := p.next(); e.Event != "error" {
		t.Fatalf("expect before connect: %+v", e)
	}
	p.send(control.Command{Cmd: "connect", Addr: addr, Streams: 3, Names: []string{"a"}})
	if e := p.next(); e.Event != "error" || e.Streams != 0 {
		t.Fatalf("connect to nothing: %+v", e)
	}
	p.send(control.Command{Cmd: "bogus"})
	if e := p.next(); e.Event != "error" {
		t.Fatalf("bogus: %+v", e)
	}
}

// End of stdin ends the load generator like quit.
func TestEOF(t *testing.T) {
	x := startServer(t)
	x.apply(clusters([]string{"c-0"}, 1, "initial"))
	p := startLG(t)
	p.send(control.Command{Cmd: "connect", Addr: x.addr, Streams: 5, Names: []string{"c-0"}})
	if e := p.next(); e.Event != "connected" {
		t.Fatalf("connect: %+v", e)
	}
	p.quit = true
	p.in.Close()
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("run did not end on EOF")
	}
}

func TestParse(t *testing.T) {
	mustAny := func(m proto.Message) *anypb.Any {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	wrapped := mustAny(&discoveryv3.Resource{
		ResourceName: &discoveryv3.ResourceName{Name: "tp2"},
		Resource:     mustAny(&clusterv3.Cluster{Name: "tp2", AltStatName: "x"}),
	})
	named := mustAny(&discoveryv3.Resource{Name: "wrapped", Resource: mustAny(&clusterv3.Cluster{Name: "wrapped"})})
	b, err := proto.Marshal(&discoveryv3.DiscoveryResponse{
		VersionInfo: "v7", Nonce: "n9", TypeUrl: clusterURL,
		Resources: []*anypb.Any{mustAny(&clusterv3.Cluster{AltStatName: "a", Name: "plain"}), wrapped, named, mustAny(&clusterv3.Cluster{Name: "other"})},
	})
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int32{"plain": 0, "tp2": 1, "wrapped": 2, "absent": 3}
	tr := &tracker{index: index, bits: make([]uint64, 1), want: 4}
	v, n, err := parseSotW(b, tr)
	if err != nil || string(v) != "v7" || string(n) != "n9" || tr.count != 3 || tr.done() {
		t.Fatalf("sotw: %q %q %v count %d", v, n, err, tr.count)
	}
	set := &tracker{set: map[string]struct{}{}, want: 4}
	if _, _, err := parseSotW(b, set); err != nil || !set.done() {
		t.Fatalf("sotw set: %v %v", err, set.set)
	}

	b, err = proto.Marshal(&discoveryv3.DeltaDiscoveryResponse{
		Nonce: "d1", TypeUrl: clusterURL,
		Resources: []*discoveryv3.Resource{
			{Name: "plain", Resource: mustAny(&clusterv3.Cluster{Name: "plain"})},
			{ResourceName: &discoveryv3.ResourceName{Name: "tp2"}},
			{Name: "wrapped"},
		},
		RemovedResources:     []string{"wrapped"},
		RemovedResourceNames: []*discoveryv3.ResourceName{{Name: "absent"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr = &tracker{index: index, bits: make([]uint64, 1), want: 2}
	n, err = parseDelta(b, tr)
	if err != nil || string(n) != "d1" || tr.count != 2 || !tr.done() {
		t.Fatalf("delta: %q %v count %d", n, err, tr.count)
	}
	if _, _, err := parseSotW([]byte{0x12, 0x05, 0x01}, nil); err == nil {
		t.Error("truncated response parsed")
	}

	// The hand-encoded requests are what proto would make.
	var req discoveryv3.DiscoveryRequest
	if err := proto.Unmarshal(append(nodeField(sotwReqNode, "loadgen-3"), sotwAck([]byte("v"), []byte("n"))...), &req); err != nil ||
		req.Node.GetId() != "loadgen-3" || req.VersionInfo != "v" || req.ResponseNonce != "n" {
		t.Fatalf("sotw request: %v %v", &req, err)
	}
	var dreq discoveryv3.DeltaDiscoveryRequest
	if err := proto.Unmarshal(append(nodeField(deltaReqNode, "loadgen-4"), deltaAck([]byte("n"))...), &dreq); err != nil ||
		dreq.Node.GetId() != "loadgen-4" || dreq.ResponseNonce != "n" {
		t.Fatalf("delta request: %v %v", &dreq, err)
	}
}

func TestPercentile(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1)
	}
	if percentile(v, 0.5) != 50 || percentile(v, 0.99) != 99 || percentile(v[:1], 0.99) != 1 {
		t.Fatal(percentile(v, 0.5), percentile(v, 0.99))
	}
}
