package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/internal/testutil/h2attack"
	"github.com/xdsd/xdsd/resource"
)

// procStatus reads a field of the server process's /proc status, in bytes
// (VmRSS, VmHWM).
func (p *proc) procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in the server's /proc status", field)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}

// resetPeak makes the server process's VmHWM its RSS now.
func (p *proc) resetPeak(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// metric reads one unlabelled metric of the server's.
func (p *proc) metric(t *testing.T, name string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(p.metrics(t))
	if m == nil {
		t.Fatalf("no %s in the server's metrics", name)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return int64(f)
}

// streams is the server's xdsd_streams, all kinds.
func (p *proc) streams(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, m := range regexp.MustCompile(`(?m)^xdsd_streams\{[^}]*\} (\S+)$`).FindAllStringSubmatch(p.metrics(t), -1) {
		f, _ := strconv.ParseFloat(m[1], 64)
		n += int64(f)
	}
	return n
}

// completeNames are n names of 64 bytes.
func completeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%064d", i)
	}
	return out
}

// TestCompleteRequestCost measures what one connection can make the
// server hold in requests complete but not yet handled, or handled and
// kept: --max-connection-request-bytes counts a request only while it
// arrives. One raw HTTP/2 connection opens XDSD_ATTACK_STREAMS (default
// 100) ADS streams and sends on each one whole request of nearly
// --max-msg-size (16 MiB), one stream after another, so that no more
// than one request is ever incomplete:
//
//   - sotw: a DiscoveryRequest of 250,000 names of 64 bytes (15.7 MiB),
//     over --max-subscriptions: each stream is refused once decoded;
//   - delta: the same names as a DeltaDiscoveryRequest's subscriptions;
//   - nack: a DiscoveryRequest NACKing with a 15.7 MiB error message, a
//     request the server takes, on a stream that stays open.
//
// For each (a server of its own), it reports the server's peak RSS over
// its RSS before (VmHWM, reset before the attack), the Go heap's peak as
// sampled every 20 ms from /metrics, and the heap in use after a
// collection once every stream was answered, with the connection still
// open, or once the handlers of a connection closed by
// --max-connection-request-bytes are done. Heavy (gigabytes), so it runs only with XDSD_ATTACK_COST=1; it
// asserts nothing.
func TestCompleteRequestCost(t *testing.T) {
	if os.Getenv("XDSD_ATTACK_COST") == "" {
		t.Skip("set XDSD_ATTACK_COST=1 to measure (heavy)")
	}
	streams, _ := strconv.Atoi(os.Getenv("XDSD_ATTACK_STREAMS"))
	if streams == 0 {
		streams = 100
	}
	names := completeNames(250000)
	big := strings.Repeat("x", 250000*66)
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name, path string
		body       []byte
		refused    bool
	}{
		{"sotw", h2attack.ADSPath, marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: names}), true},
		{"delta", h2attack.DeltaADSPath, marshal(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNamesSubscribe: names}), true},
		{"nack", h2attack.ADSPath, marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"x"},
			ErrorDetail: &status.Status{Code: 3, Message: big}}), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startXdsd(t)
			heapBefore := p.heapInuse(t)
			rssBefore := p.procStatus(t, "VmRSS")
			p.resetPeak(t)
			var peakHeap int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					peakHeap = max(peakHeap, p.metric(t, "go_memstats_heap_inuse_bytes"))
				}
			}()
			start := time.Now()
			a, conn := h2attack.Complete(t, p.xds, c.path, streams, c.body)
			defer conn.Close()
			st := a.Wait(3*time.Minute, func(st h2attack.State) bool {
				if c.refused {
					return st.Ended == streams
				}
				return st.Answered == streams
			})
			took := time.Since(start)
			// Until the handlers are done (those of a closed connection
			// finish what they were decoding).
			tick := time.NewTicker(20 * time.Millisecond)
			for deadline := time.Now().Add(time.Minute); st.Closed && p.streams(t) > 0 && time.Now().Before(deadline); {
				<-tick.C
			}
			tick.Stop()
			close(stop)
			wg.Wait()
			peak := p.procStatus(t, "VmHWM")
			held := p.heapInuse(t)
			t.Logf("%s: %d streams × %.1f MiB (%d MiB sent) in %v: %d ended (%s), %d answered, closed %v",
				c.name, streams, float64(len(c.body))/(1<<20), st.Sent>>20, took.Round(time.Millisecond), st.Ended, st.Why, st.Answered, st.Closed)
			t.Logf("%s: peak RSS %d MiB, %d MiB before (+%d MiB); peak heap in use (sampled) %d MiB, %d MiB before; heap in use after, connection open: %d MiB (%+d MiB)",
				c.name, peak>>20, rssBefore>>20, (peak-rssBefore)>>20, peakHeap>>20, heapBefore>>20, held>>20, (held-heapBefore)>>20)
		})
	}
}

// Requests complete and being handled count in
// --max-connection-request-bytes with those still arriving: one raw
// HTTP/2 connection sends, on each of four ADS streams one after
// another, a small request and then a whole one of about 900 KiB, which
// waits in the stream's rate limiter (--request-burst 1) holding its
// bytes. No more than one request is ever incomplete, so before held
// requests were counted the connection stayed open; with a limit of 2
// MiB the third held request closes it, counted, while a grpc-go xDS
// client on another connection is served.
func TestInflightHeldRequestBound(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t, "--max-msg-size", "1048576", "--max-connection-request-bytes", "2097152", "--request-rate", "2", "--request-burst", "1")
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	small, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	big, err := proto.Marshal(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: completeNames(14000)})
	if err != nil {
		t.Fatal(err)
	}
	a, c := h2attack.Complete(t, x.xds, h2attack.ADSPath, 4, small, big)
	defer c.Close()
	if how := a.Closed(time.Minute); how == "" {
		t.Fatalf("the connection holding %d requests of %d bytes, over the limit of 2 MiB, was not closed", 4, len(big))
	} else {
		t.Logf("the connection over the limit: %s", how)
	}
	until(t, dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil)), be.addr)
	if m := x.metrics(t); !strings.Contains(m, "xdsd_connection_request_bytes_refused_total 1") {
		t.Errorf("xdsd_connection_request_bytes_refused_total is not 1:\n%s", grepLines(m, "xdsd_connection"))
	}
}
