package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/bench/control"
)

const (
	connectTimeout       = 120 * time.Second
	defaultExpectTimeout = 60 * time.Second
	streamsPerConn       = 100
	maxLoggedErrors      = 5

	sotwMethod  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	deltaMethod = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)

var adsDesc = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// runner executes the commands read from the driver.
type runner struct {
	ctx  context.Context
	log  *log.Logger
	outu sync.Mutex
	out  io.Writer
	wg   sync.WaitGroup // waiters (connect, expect)

	group *group       // the streams of the last connect
	exp   *expectation // the last expect
}

// run reads commands from stdin and writes events to stdout until quit,
// the end of stdin, or the end of ctx.
func run(ctx context.Context, stdin io.Reader, stdout io.Writer, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runner{ctx: ctx, out: stdout, log: log.New(stderr, "loadgen: ", log.Lmicroseconds)}
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 0, 1<<20), 1<<28)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			select {
			case lines <- line:
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	defer func() {
		if r.group != nil {
			r.group.close()
		}
		r.wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			return err // EOF: nil
		case line := <-lines:
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var c control.Command
			if err := json.Unmarshal(line, &c); err != nil {
				r.emit(control.Event{Event: "error", Error: "bad command: " + err.Error()})
				continue
			}
			switch c.Cmd {
			case "connect":
				r.connect(c)
			case "expect":
				r.expect(c)
				if c.Ack {
					r.emit(control.Event{Event: "expecting"})
				}
			case "t0":
				// The zero of the active expect's latencies, set by the
				// driver just before it makes the change.
				if r.exp != nil {
					r.exp.t0.Store(c.T0)
				}
			case "quit":
				return nil
			default:
				r.emit(control.Event{Event: "error", Error: fmt.Sprintf("unknown command %q", c.Cmd)})
			}
		}
	}
}

func (r *runner) emit(e control.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		r.log.Print(err)
		return
	}
	r.outu.Lock()
	defer r.outu.Unlock()
	if _, err := r.out.Write(append(b, '\n')); err != nil {
		r.log.Print("writing event: ", err)
	}
	if f, ok := r.out.(interface{ Flush() error }); ok {
		f.Flush()
	}
}

// config is what every stream of a connect shares.
type config struct {
	delta bool
	// first[k] and ack[k] are the marshaled shared parts of the first
	// request and of ACKs for streams with parameter set k.
	first, ack [][]byte
	index      map[string]int32 // Names → bit; nil for wildcard or glob
	want       int              // distinct resources to wait for
}

func newConfig(c control.Command) (*config, error) {
	cfg := &config{delta: c.Delta}
	params := c.Params
	if len(params) == 0 {
		params = []map[string]string{nil}
	}
	setMode := c.Wildcard || c.Glob != ""
	if c.Wildcard && c.Glob != "" {
		return nil, errors.New("both wildcard and glob")
	}
	if !setMode && len(c.Names) == 0 {
		return nil, errors.New("no names, and neither wildcard nor glob")
	}
	if setMode {
		cfg.want = c.Expect
	} else {
		cfg.index = make(map[string]int32, len(c.Names))
		for _, n := range c.Names {
			if _, dup := cfg.index[n]; !dup {
				cfg.index[n] = int32(len(cfg.index))
			}
		}
		cfg.want = len(cfg.index)
	}
	det := proto.MarshalOptions{Deterministic: true}
	for _, p := range params {
		// With parameters, the subscription goes by TP2 resource locators:
		// one per name, or one for the wildcard ("*") or the glob.
		var locs []*discoveryv3.ResourceLocator
		if p != nil {
			names := c.Names
			switch {
			case c.Wildcard:
				names = []string{"*"}
			case c.Glob != "":
				names = []string{c.Glob}
			}
			for _, n := range names {
				locs = append(locs, &discoveryv3.ResourceLocator{Name: n, DynamicParameters: p})
			}
		}
		var first, ack proto.Message
		if c.Delta {
			req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterURL}
			switch {
			case locs != nil:
				req.ResourceLocatorsSubscribe = locs
			case c.Wildcard:
				req.ResourceNamesSubscribe = []string{"*"}
			case c.Glob != "":
				req.ResourceNamesSubscribe = []string{c.Glob}
			default:
				req.ResourceNamesSubscribe = c.Names
			}
			first, ack = req, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: clusterURL}
		} else {
			req := &discoveryv3.DiscoveryRequest{TypeUrl: clusterURL}
			switch {
			case locs != nil:
				req.ResourceLocators = locs
			case c.Wildcard:
			case c.Glob != "":
				req.ResourceNames = []string{c.Glob}
			default:
				req.ResourceNames = c.Names
			}
			first, ack = req, req
		}
		fb, err := det.Marshal(first)
		if err != nil {
			return nil, err
		}
		ab, err := det.Marshal(ack)
		if err != nil {
			return nil, err
		}
		cfg.first = append(cfg.first, fb)
		cfg.ack = append(cfg.ack, ab)
	}
	return cfg, nil
}

// group is the set of streams one connect opened.
type group struct {
	r       *runner
	cfg     *config
	ctx     context.Context
	cancel  context.CancelFunc
	conns   []*grpc.ClientConn
	streams []*stream
	wg      sync.WaitGroup // stream goroutines
	closed  chan struct{}  // closed by close

	start        time.Time
	connected    atomic.Int64
	allConnected chan struct{}
	connectTook  time.Duration // set before allConnected closes

	failed   atomic.Int64
	firstErr atomic.Pointer[error]
	failCh   chan struct{} // closed on the first stream failure

	exp atomic.Pointer[expectation] // the active expect
}

func (r *runner) connect(c control.Command) {
	if r.group != nil {
		// A new connect replaces the previous streams.
		r.group.close()
		r.group = nil
	}
	start := time.Now()
	fail := func(err error) { r.emit(control.Event{Event: "error", Error: "connect: " + err.Error()}) }
	if c.Streams <= 0 {
		fail(errors.New("streams must be positive"))
		return
	}
	cfg, err := newConfig(c)
	if err != nil {
		fail(err)
		return
	}
	nconns := c.Conns
	if nconns <= 0 {
		nconns = (c.Streams + streamsPerConn - 1) / streamsPerConn
	}
	nconns = min(nconns, c.Streams)
	addrs := c.Addrs
	if len(addrs) == 0 {
		addrs = []string{c.Addr}
	}
	creds, err := transportCreds(c)
	if err != nil {
		fail(err)
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	g := &group{r: r, cfg: cfg, ctx: ctx, cancel: cancel, closed: make(chan struct{}),
		start: start, allConnected: make(chan struct{}), failCh: make(chan struct{})}
	for i := range nconns {
		target := addrs[i%len(addrs)]
		if !strings.Contains(target, ":///") {
			target = "passthrough:///" + target
		}
		cc, err := grpc.NewClient(target,
			grpc.WithTransportCredentials(creds),
			grpc.WithInitialWindowSize(4<<20),
			grpc.WithInitialConnWindowSize(16<<20),
			grpc.WithReadBufferSize(256<<10),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.ForceCodecV2(codec{})),
		)
		if err != nil {
			g.close()
			fail(err)
			return
		}
		g.conns = append(g.conns, cc)
	}
	r.group = g
	g.streams = make([]*stream, c.Streams)
	for i := range g.streams {
		s := &stream{g: g, idx: i, param: i % len(cfg.first)}
		s.tr = tracker{index: cfg.index, want: cfg.want}
		if cfg.index != nil {
			s.tr.bits = make([]uint64, (len(cfg.index)+63)/64)
		} else {
			s.tr.set = map[string]struct{}{}
		}
		g.streams[i] = s
	}
	g.wg.Add(len(g.streams))
	for i, s := range g.streams {
		go s.run(g.conns[i%len(g.conns)])
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		n := len(g.streams)
		// 100,000 streams take longer than 5,000 on two shared cores.
		timeout := max(connectTimeout, time.Duration(n/1000)*3*time.Second)
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-g.allConnected:
			r.emit(control.Event{Event: "connected", Streams: n, MS: ms(g.connectTook)})
		case <-g.failCh:
			r.emit(control.Event{Event: "error", Streams: int(g.connected.Load()),
				Error: fmt.Sprintf("connect: %d of %d streams connected; a stream failed: %v", g.connected.Load(), n, g.err())})
		case <-t.C:
			r.emit(control.Event{Event: "error", Streams: int(g.connected.Load()),
				Error: fmt.Sprintf("connect: %d of %d streams connected after %v", g.connected.Load(), n, timeout)})
		case <-g.closed:
		}
	}()
}

// transportCreds are the connections' credentials: insecure, or TLS with
// the command's CA and client certificate.
func transportCreds(c control.Command) (credentials.TransportCredentials, error) {
	if c.TLSCA == "" {
		if c.TLSCert != "" || c.TLSKey != "" {
			return nil, errors.New("tls_cert and tls_key need tls_ca")
		}
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(c.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("tls_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls_ca %s: no PEM certificate in it", c.TLSCA)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if c.TLSCert != "" || c.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls_cert, tls_key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// close ends every stream and connection and waits for the streams'
// goroutines.
func (g *group) close() {
	close(g.closed)
	g.cancel()
	for _, cc := range g.conns {
		cc.Close()
	}
	g.wg.Wait()
}

func (g *group) streamConnected(now time.Time) {
	if int(g.connected.Add(1)) == len(g.streams) {
		g.connectTook = now.Sub(g.start)
		close(g.allConnected)
	}
}

func (g *group) streamFailed(s *stream, err error) {
	if g.ctx.Err() != nil {
		return // closing
	}
	n := g.failed.Add(1)
	if n <= maxLoggedErrors {
		g.r.log.Printf("stream %d: %v", s.idx, err)
	}
	if g.firstErr.CompareAndSwap(nil, &err) {
		close(g.failCh)
	}
}

func (g *group) err() error {
	if p := g.firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

// stream is one ADS stream. Only its goroutine touches it.
type stream struct {
	g     *group
	idx   int
	param int
	tr    tracker
	req   rawReq
	last  atomic.Int64 // Unix ns of the last response, for diagnostics
	round int          // the highest marker round seen outside an expect
	early atomic.Pointer[early]
}

// early is a response that carried a new marker round while no expect was
// active.
type early struct {
	round int
	at    int64 // Unix ns
	bytes int64
}

func (s *stream) run(cc *grpc.ClientConn) {
	g := s.g
	defer g.wg.Done()
	cfg := g.cfg
	method, nodeNum := sotwMethod, sotwReqNode
	if cfg.delta {
		method, nodeNum = deltaMethod, deltaReqNode
	}
	cs, err := cc.NewStream(g.ctx, adsDesc, method)
	if err != nil {
		g.streamFailed(s, err)
		return
	}
	s.req = rawReq{static: cfg.first[s.param], dyn: nodeField(protowire.Number(nodeNum), fmt.Sprintf("loadgen-%d", s.idx))}
	if err := cs.SendMsg(&s.req); err != nil {
		g.streamFailed(s, err)
		return
	}
	ack := cfg.ack[s.param]
	tracking := true
	var m rawMsg
	for {
		if err := cs.RecvMsg(&m); err != nil {
			g.streamFailed(s, err)
			return
		}
		now := time.Now()
		s.last.Store(now.UnixNano())
		b := m.buf.ReadOnlyData()
		var t *tracker
		if tracking {
			t = &s.tr
		}
		var dyn []byte
		if cfg.delta {
			nonce, err := parseDelta(b, t)
			if err != nil {
				m.buf.Free()
				g.streamFailed(s, err)
				return
			}
			dyn = deltaAck(nonce)
		} else {
			if t != nil {
				t.reset() // SotW: each response is the whole state
			}
			version, nonce, err := parseSotW(b, t)
			if err != nil {
				m.buf.Free()
				g.streamFailed(s, err)
				return
			}
			dyn = sotwAck(version, nonce)
		}
		if tracking && s.tr.done() {
			tracking = false
			s.tr = tracker{}
			g.streamConnected(now)
		}
		if e := g.exp.Load(); e != nil {
			e.observe(s.idx, b, now)
		} else if round := maxMarkerRound(b); round > s.round {
			// No expect yet: the driver may have made its change before
			// this stream saw its expect. Note when the round's marker
			// came, for the expect to pick up; if the expect got in
			// meanwhile, handle the response here (exactly one of the two
			// sees the other's write).
			s.round = round
			p := &early{round: round, at: now.UnixNano(), bytes: int64(len(b))}
			s.early.Store(p)
			if e := g.exp.Load(); e != nil && s.early.CompareAndSwap(p, nil) {
				e.observe(s.idx, b, now)
			}
		}
		m.buf.Free()
		m.buf = nil
		s.req = rawReq{static: ack, dyn: dyn}
		if err := cs.SendMsg(&s.req); err != nil {
			g.streamFailed(s, err)
			return
		}
	}
}

// expectation is one expect command's watch.
type expectation struct {
	marker    []byte
	t0        atomic.Int64 // may be moved later by a t0 command
	recs      []record     // per stream
	remaining atomic.Int64
	done      chan struct{} // every stream has the marker
	cut       chan struct{} // a newer expect ends this one
}

// record is one stream's observations, alone on its cache line.
type record struct {
	at        atomic.Int64 // Unix ns of the first response with the marker; 0: none yet
	responses atomic.Int64
	bytes     atomic.Int64
	_         [40]byte
}

func (e *expectation) observe(i int, b []byte, now time.Time) {
	r := &e.recs[i]
	r.responses.Add(1)
	r.bytes.Add(int64(len(b)))
	if r.at.Load() == 0 && bytes.Contains(b, e.marker) {
		e.got(r, now.UnixNano())
	}
}

// got notes a stream's first response with the marker.
func (e *expectation) got(r *record, at int64) {
	if r.at.CompareAndSwap(0, at) && e.remaining.Add(-1) == 0 {
		close(e.done)
	}
}

func (r *runner) expect(c control.Command) {
	g := r.group
	if g == nil {
		r.emit(control.Event{Event: "error", Error: "expect: not connected"})
		return
	}
	if c.Marker == "" {
		r.emit(control.Event{Event: "error", Error: "expect: no marker"})
		return
	}
	if r.exp != nil {
		close(r.exp.cut) // only one at a time: the previous one reports now
	}
	timeout := defaultExpectTimeout
	if c.TimeoutMS > 0 {
		timeout = time.Duration(c.TimeoutMS) * time.Millisecond
	}
	e := &expectation{marker: []byte(c.Marker), recs: make([]record, len(g.streams)),
		done: make(chan struct{}), cut: make(chan struct{})}
	e.t0.Store(c.T0)
	if c.T0 == 0 {
		e.t0.Store(time.Now().UnixNano())
	}
	e.remaining.Store(int64(len(g.streams)))
	r.exp = e
	g.exp.Store(e)
	// Pick up the marker responses streams got between T0 and now.
	round, isRound := markerRound(c.Marker)
	for i, s := range g.streams {
		if p := s.early.Swap(nil); p != nil && isRound && p.round == round && p.at >= e.t0.Load() {
			rec := &e.recs[i]
			rec.responses.Add(1)
			rec.bytes.Add(p.bytes)
			e.got(rec, p.at)
		}
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-e.done:
		case <-t.C:
		case <-e.cut:
		case <-g.closed:
			return
		}
		g.exp.CompareAndSwap(e, nil)
		r.emit(e.result(g))
	}()
}

func (e *expectation) result(g *group) control.Event {
	var (
		lat       []float64
		responses int64
		total     int64
	)
	for i := range e.recs {
		r := &e.recs[i]
		if at := r.at.Load(); at != 0 {
			lat = append(lat, float64(at-e.t0.Load())/1e6)
		}
		responses += r.responses.Load()
		total += r.bytes.Load()
	}
	n := len(e.recs)
	ev := control.Event{Event: "received", Streams: n, Missing: n - len(lat), Responses: responses,
		BytesPerStream: float64(total) / float64(n)}
	if len(lat) > 0 {
		sort.Float64s(lat)
		ev.P50MS = percentile(lat, 0.50)
		ev.P99MS = percentile(lat, 0.99)
		ev.MaxMS = lat[len(lat)-1]
	}
	if ev.Missing > 0 {
		// A response that reached a stream after T0 but before this expect
		// was registered went unseen: the driver changed too early.
		early := 0
		for i := range e.recs {
			if e.recs[i].at.Load() == 0 && g.streams[i].last.Load() >= e.t0.Load() {
				early++
			}
		}
		g.r.log.Printf("expect %q: %d streams missing; %d of them had a response between T0 and the expect", e.marker, ev.Missing, early)
	}
	if f := g.failed.Load(); f > 0 {
		ev.Error = fmt.Sprintf("%d streams failed; first: %v", f, g.err())
	}
	return ev
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
