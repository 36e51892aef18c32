package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil/h2attack"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/internal/testutil/testpki"
	"github.com/xdsd/xdsd/resource"
)

// heapInuse reads the server's HeapInuse after a collection, from the
// admin API's heap profile (its MemStats footer).
func (p *proc) heapInuse(t *testing.T) int64 {
	t.Helper()
	resp, err := http.Get("http://" + p.admin + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`# HeapInuse = (\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no HeapInuse in the heap profile:\n%.500s", b)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// inflightMeasure is one attack measured: the heap it made the server
// hold, and how its connection ended.
func inflightMeasure(t *testing.T, p *proc, streams int, announce, send int64) (grew int64, ended string) {
	t.Helper()
	before := p.heapInuse(t)
	start := time.Now()
	a, c := h2attack.Run(t, p.xds, streams, announce, send)
	defer c.Close()
	// While the attack holds what it sent (a connection the server closed
	// holds nothing).
	after := p.heapInuse(t)
	st := a.State()
	closed, sent := st.Closed, st.Sent
	if closed {
		ended = a.Closed(time.Minute)
	}
	t.Logf("%d streams, %d B announced, %d B to send each (%d MiB in all), %d MiB sent in %v: heap in use %d MiB → %d MiB (%+d MiB); connection %s",
		streams, announce, send, int64(streams)*send>>20, sent>>20, time.Since(start).Round(time.Millisecond), before>>20, after>>20, (after-before)>>20,
		map[bool]string{true: "closed: " + ended, false: "kept"}[closed])
	return after - before, ended
}

// TestInflightRequestCost measures what one connection can make the server
// hold in requests still being read. gRPC's flow control does not bound
// it: a stream's window grows to the whole announced message once the
// handler reads it, and the connection's is given back as data arrives;
// without --max-connection-request-bytes one connection held
// --max-streams-per-connection × --max-msg-size (1.6 GiB). Two attacks on
// one raw HTTP/2 connection, each opening as many ADS streams as the
// server allows (XDSD_ATTACK_STREAMS, default 100), every stream
// announcing the largest message allowed (XDSD_ATTACK_MSG, default
// --max-msg-size's 16 MiB):
//
//   - each stream sends all but 64 KiB of its message, never the rest: the
//     connection must be closed once it passes the limit
//     (XDSD_ATTACK_LIMIT, default 64 MiB);
//   - each stream sends its share of the limit, less a KiB: the most one
//     connection may hold, kept open; the heap must grow by at most the
//     limit and a margin.
//
// Heavy (it measures the server's heap), so it runs only with
// XDSD_ATTACK_COST=1.
func TestInflightRequestCost(t *testing.T) {
	if os.Getenv("XDSD_ATTACK_COST") == "" {
		t.Skip("set XDSD_ATTACK_COST=1 to measure (heavy)")
	}
	streams, _ := strconv.Atoi(os.Getenv("XDSD_ATTACK_STREAMS"))
	if streams == 0 {
		streams = 100
	}
	msg, _ := strconv.ParseInt(os.Getenv("XDSD_ATTACK_MSG"), 10, 64)
	var args []string
	if msg == 0 {
		msg = 16 << 20
	} else {
		args = append(args, "--max-msg-size", strconv.FormatInt(msg, 10))
	}
	limit, _ := strconv.ParseInt(os.Getenv("XDSD_ATTACK_LIMIT"), 10, 64)
	if limit == 0 {
		limit = 64 << 20
	} else {
		args = append(args, "--max-connection-request-bytes", strconv.FormatInt(limit, 10))
	}
	// A server for each attack: gRPC keeps the buffers of a closed
	// connection in its pools, which the second would reuse.
	p := startXdsd(t, args...)
	margin := limit/10 + 32<<20

	grew, ended := inflightMeasure(t, p, streams, msg, msg-64<<10)
	if int64(streams)*(msg-64<<10) > limit && ended == "" {
		t.Errorf("the connection sending %d bytes of unfinished requests, over the limit of %d, was not closed", int64(streams)*(msg-64<<10), limit)
	}
	if grew > limit+margin {
		t.Errorf("the server's heap grew by %d bytes, over the limit of %d and a margin", grew, limit)
	}

	if !strings.Contains(p.metrics(t), "xdsd_connection_request_bytes_refused_total 1") {
		t.Errorf("xdsd_connection_request_bytes_refused_total is not 1")
	}

	p = startXdsd(t, args...)
	each := min(limit/int64(streams)-1024, msg-1)
	grew, ended = inflightMeasure(t, p, streams, msg, each)
	if ended != "" {
		t.Errorf("a connection within the limit (%d streams × %d bytes) was closed: %s", streams, each, ended)
	}
	if grew > limit+margin {
		t.Errorf("the server's heap grew by %d bytes, over the limit of %d and a margin", grew, limit)
	}
}

// A connection whose requests not yet complete pass
// --max-connection-request-bytes is closed, and counted, while a real
// grpc-go xDS client on another connection is served. The attack is the
// one above, scaled down: four ADS streams on one raw HTTP/2 connection,
// each sending 900 KiB of a 1 MiB message, against a limit of 2 MiB.
func TestInflightRequestBound(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t, "--max-msg-size", "1048576", "--max-connection-request-bytes", "2097152")
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	a, c := h2attack.Run(t, x.xds, 4, 1<<20, 900<<10)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatal("the connection over the limit was not closed")
	} else {
		t.Logf("the connection over the limit: %s", how)
	}
	until(t, dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil)), be.addr)
	if m := x.metrics(t); !strings.Contains(m, "xdsd_connection_request_bytes_refused_total 1") {
		t.Errorf("xdsd_connection_request_bytes_refused_total is not 1:\n%s", grepLines(m, "xdsd_connection"))
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Real clients sending the largest requests they send are not refused by
// --max-connection-request-bytes at its default: on one connection, two
// delta streams subscribe 100,000 names each at once (60-byte names, a
// 6.3 MB request, and 40-byte ones: the most the connection's
// subscription limit takes), on another a SotW stream subscribes 100,000
// names, and a grpc-go xDS client makes RPCs through the server; each is
// answered, and no connection is closed.
func TestInflightLargeRequestsServed(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	names := func(width int) []string {
		out := make([]string, 100000)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", width, i)
		}
		out[len(out)-1] = "quickstart"
		return out
	}
	conn := func() *grpc.ClientConn {
		// The delta answers list the 99,999 missing names: 6 MB.
		c, err := grpc.NewClient(x.xds, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	one := conn()
	d1 := protocoltest.NewDelta(t, one, protocoltest.Node("big-1", nil))
	d2 := protocoltest.NewDelta(t, one, protocoltest.Node("big-2", nil))
	s := protocoltest.NewSotW(t, conn(), protocoltest.Node("big-3", nil))
	n60, n40, n16 := names(60), names(40), names(16)
	d1.Sub(resource.ClusterURL, n60...)
	d2.Sub(resource.ClusterURL, n40...)
	s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: n16})
	for _, d := range []*protocoltest.Delta{d1, d2} {
		for r := d.Recv(); !slices.ContainsFunc(r.Resources, func(r *discoveryv3.Resource) bool { return r.Name == "quickstart" }); r = d.Recv() {
			d.Ack(r)
		}
	}
	for r := s.Recv(); !slices.Contains(protocoltest.SotWNames(t, r), "quickstart"); r = s.Recv() {
		s.Ack(r, n16...)
	}
	until(t, dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil)), be.addr)
	if m := x.metrics(t); !strings.Contains(m, "xdsd_connection_request_bytes_refused_total 0") {
		t.Errorf("a connection was refused:\n%s", grepLines(m, "xdsd_connection"))
	}
}

// The bound holds on both xDS listeners, relay's and serve's, and after
// TLS: a relay with the scaled-down limit closes the attack's connection
// and serves a grpc-go client through it; `xdsd serve` with mTLS closes
// the attack made over a client certificate.
func TestInflightRequestBoundRelayAndMTLS(t *testing.T) {
	small := []string{"--max-msg-size", "1048576", "--max-connection-request-bytes", "2097152"}
	be := startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	r := startRelay(t, x.xds, small...)
	a, c := h2attack.Run(t, r.xds, 4, 1<<20, 900<<10)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatal("the relay kept the connection over the limit")
	}
	until(t, dial(t, "xds:///quickstart", bootstrap(r.xds, nil, nil)), be.addr)
	if m := r.metrics(t); !strings.Contains(m, "xdsd_connection_request_bytes_refused_total 1") {
		t.Errorf("relay: xdsd_connection_request_bytes_refused_total is not 1:\n%s", grepLines(m, "xdsd_connection"))
	}

	dir := t.TempDir()
	ca := testpki.NewCA(t, "e2e CA")
	sf := ca.Leaf(t, testpki.LeafOpts{Server: true}).Write(t, ca, dir, "server")
	client := ca.Leaf(t, testpki.LeafOpts{URI: "spiffe://example.org/ns/prod/sa/web"})
	m := startXdsd(t, append([]string{"--tls-cert", sf.Cert, "--tls-key", sf.Key, "--client-ca", sf.CA}, small...)...)
	tc, err := tls.Dial("tcp", m.xds, &tls.Config{Certificates: []tls.Certificate{client.TLS}, RootCAs: ca.Pool(), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	a, c = h2attack.RunOn(t, tc, m.xds, 4, 1<<20, 900<<10)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatal("serve over mTLS kept the connection over the limit")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	resp, err := hc.Get("https://" + m.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "xdsd_connection_request_bytes_refused_total 1") {
		t.Errorf("serve over mTLS: xdsd_connection_request_bytes_refused_total is not 1:\n%s", grepLines(string(b), "xdsd_connection"))
	}
}
