package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/xdsd/xdsd/bench/control"
)

// options select and configure the implementation start runs.
type options struct {
	impl     string
	xdsAddr  string // default 127.0.0.1:0
	upstream string // relay only
	store    string // xdsd only: etcd://... or bolt:PATH instead of an in-memory store
	// tlsCert and tlsKey serve xDS over TLS; clientCA then requires client
	// certificates it signs (mTLS), for comparisons with xdsd serve's.
	tlsCert, tlsKey, clientCA string
	log                       *slog.Logger
}

// instance is a running implementation: its xDS server on xdsAddr and the
// control API as an http.Handler.
type instance struct {
	xdsAddr string
	handler http.Handler
	stop    func()
}

// impl is one xDS server implementation under test. The control handler
// serializes the calls of setup and change and builds the cluster protos
// for them, with the same code for every implementation.
type impl interface {
	// setup replaces the whole state with clusters: cl[i][j] is variant j of
	// cluster i. It returns once the server serves them.
	setup(ctx context.Context, s control.Setup, cl [][]*clusterv3.Cluster) error
	// change replaces clusters 0…len(cl)-1 (every variant) and returns once
	// the server has taken the change.
	change(ctx context.Context, round int, cl [][]*clusterv3.Cluster) error
	// close ends the streams and releases the implementation.
	close()
}

// errUnsupported is what an implementation returns for a setup or change it
// cannot do (answered 501).
var errUnsupported = errors.New("not supported by this implementation")

// implNames lists the implementations start knows.
var implNames = []string{"xdsd", "gcp-snapshot", "gcp-linear", "raw", "relay"}

// start runs the implementation o.impl: its gRPC server (ADS, SotW and
// delta) listening on o.xdsAddr, and returns its control handler.
func start(o options) (*instance, error) {
	if o.xdsAddr == "" {
		o.xdsAddr = "127.0.0.1:0"
	}
	if o.log == nil {
		o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if (o.impl == "relay") != (o.upstream != "") {
		return nil, errors.New("--upstream is required with --impl relay, and only with it")
	}
	if o.store != "" && o.impl != "xdsd" {
		return nil, errors.New("--store is only for --impl xdsd")
	}
	var (
		im      impl
		reg     func(*grpc.Server)
		srvOpts []grpc.ServerOption
		err     error
	)
	switch o.impl {
	case "xdsd":
		im, reg, srvOpts, err = newXdsd(o.log, o.store)
		if err != nil {
			return nil, err
		}
	case "gcp-snapshot":
		im, reg = newGCPSnapshot()
	case "gcp-linear":
		im, reg = newGCPLinear()
	case "raw":
		im, reg, srvOpts = newRaw()
	case "relay":
		im, reg, srvOpts, err = newRelay(o.upstream, o.log)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--impl %q: want one of %s", o.impl, strings.Join(implNames, ", "))
	}
	creds, err := o.creds()
	if err != nil {
		im.close()
		return nil, err
	}
	if creds != nil {
		srvOpts = append(srvOpts, grpc.Creds(creds))
	}
	lis, err := net.Listen("tcp", o.xdsAddr)
	if err != nil {
		im.close()
		return nil, fmt.Errorf("xDS listener: %w", err)
	}
	// Every implementation gets the same gRPC server settings and the same
	// stream counting; only the codec differs where the implementation
	// needs its own to send pre-encoded responses.
	var streams atomic.Int64
	g := grpc.NewServer(append(srvOpts, grpc.StreamInterceptor(countStreams(&streams)))...)
	reg(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := g.Serve(lis); err != nil {
			o.log.Error("xDS server", "error", err)
		}
	}()
	c := &controller{impl: im, streams: &streams}
	var once sync.Once
	return &instance{
		xdsAddr: lis.Addr().String(),
		handler: c.mux(),
		stop: func() {
			once.Do(func() {
				im.close()
				g.Stop()
				<-done
			})
		},
	}, nil
}

// creds are the TLS credentials of --tls-cert, --tls-key and --client-ca;
// nil without --tls-cert.
func (o options) creds() (credentials.TransportCredentials, error) {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if o.tlsCert == "" {
		if o.clientCA != "" {
			return nil, errors.New("--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.clientCA != "" {
		pem, err := os.ReadFile(o.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca %s: no PEM certificate in it", o.clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

// countStreams counts the streams open on the server, the same way for
// every implementation.
func countStreams(n *atomic.Int64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		n.Add(1)
		defer n.Add(-1)
		return h(srv, ss)
	}
}

// controller serves the control API.
type controller struct {
	mu         sync.Mutex // serializes setup and change
	impl       impl
	streams    *atomic.Int64
	setup      *control.Setup // the last successful setup
	pad        string
	encodedLen atomic.Int64
}

func (c *controller) mux() http.Handler {
	m := http.NewServeMux()
	// Profiles, for explaining the figures (BENCHMARKS.md).
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("POST /setup", c.handleSetup)
	m.HandleFunc("POST /change", c.handleChange)
	m.HandleFunc("POST /gc", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		debug.FreeOSMemory()
		writeJSON(w, c.stats())
	})
	m.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, c.stats()) })
	return m
}

func (c *controller) handleSetup(w http.ResponseWriter, r *http.Request) {
	var s control.Setup
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		http.Error(w, "setup: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s.Clusters < 1 {
		http.Error(w, "setup: clusters must be at least 1", http.StatusBadRequest)
		return
	}
	if s.Variants < 1 {
		s.Variants = 1
	}
	if s.PaddingBytes == 0 {
		s.PaddingBytes = 200
	}
	if s.PaddingBytes < 0 {
		s.PaddingBytes = 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pad := strings.Repeat("x", s.PaddingBytes)
	cl := make([][]*clusterv3.Cluster, s.Clusters)
	for i := range cl {
		cl[i] = buildVariants(s, pad, i, "initial")
	}
	if err := c.impl.setup(r.Context(), s, cl); err != nil {
		httpError(w, "setup", err)
		return
	}
	c.setup, c.pad = &s, pad
	c.encodedLen.Store(int64(proto.Size(cl[0][0])))
	writeJSON(w, c.stats())
}

func (c *controller) handleChange(w http.ResponseWriter, r *http.Request) {
	var ch control.Change
	if err := json.NewDecoder(r.Body).Decode(&ch); err != nil {
		http.Error(w, "change: "+err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.setup == nil {
		http.Error(w, "change: no setup yet", http.StatusConflict)
		return
	}
	n := min(max(ch.Count, 0), c.setup.Clusters)
	marker := fmt.Sprintf(control.MarkerFormat, ch.Round)
	cl := make([][]*clusterv3.Cluster, n)
	for i := range cl {
		cl[i] = buildVariants(*c.setup, c.pad, i, marker)
	}
	if err := c.impl.change(r.Context(), ch.Round, cl); err != nil {
		httpError(w, "change", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func httpError(w http.ResponseWriter, what string, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, errUnsupported) {
		code = http.StatusNotImplemented
	}
	http.Error(w, what+": "+err.Error(), code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// clusterName names cluster i as the setup asks.
func clusterName(s control.Setup, i int) string {
	if s.Glob {
		return fmt.Sprintf(control.GlobMemberFormat, i)
	}
	return fmt.Sprintf(control.ClusterFormat, i)
}

// variantSuffix makes the variants of a cluster differ: "" without
// variants, "-v<j>" with.
func variantSuffix(s control.Setup, j int) string {
	if s.Variants <= 1 {
		return ""
	}
	return "-v" + strconv.Itoa(j)
}

// buildVariants builds every variant of cluster i with alt_stat_name alt
// (plus the variant's suffix).
func buildVariants(s control.Setup, pad string, i int, alt string) []*clusterv3.Cluster {
	vs := make([]*clusterv3.Cluster, max(s.Variants, 1))
	name := clusterName(s, i)
	for j := range vs {
		vs[j] = buildCluster(name, alt+variantSuffix(s, j), pad)
	}
	return vs
}

// buildCluster is the one cluster builder of every implementation.
func buildCluster(name, altStatName, pad string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		},
		LbPolicy:    clusterv3.Cluster_ROUND_ROBIN,
		AltStatName: altStatName,
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			"bench": {Fields: map[string]*structpb.Value{"pad": structpb.NewStringValue(pad)}},
		}},
	}
}

func (c *controller) stats() control.ServerStats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	var cpu int64
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		cpu = ru.Utime.Nano() + ru.Stime.Nano()
	}
	return control.ServerStats{
		PID:        os.Getpid(),
		RSSBytes:   vmRSS(),
		HeapBytes:  int64(ms.HeapInuse),
		StackBytes: int64(ms.StackInuse),
		Goroutines: runtime.NumGoroutine(),
		Streams:    int(c.streams.Load()),
		CPUNanos:   cpu,
		EncodedLen: int(c.encodedLen.Load()),
	}
}

// vmRSS reads VmRSS from /proc/self/status, in bytes (0 if unknown).
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "1234 kB"
			if len(f) >= 1 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return n << 10
				}
			}
		}
	}
	return 0
}
