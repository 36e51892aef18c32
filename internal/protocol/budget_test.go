//go:build !race

package protocol_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/db"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/protocol/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// idleStreamBudget is what one idle, ACKed SotW stream may cost the server:
// Go heap in use plus goroutine stacks, after collection. Most of it is
// gRPC's (the handler goroutine's stack, 8 KiB once shrunk, and the
// transport's stream); xdsd's own state is about 1.5 KiB. Before a stream
// had one goroutine (ServerOptions, runSingle) it cost about 24 KiB.
const idleStreamBudget = 16 << 10

// memInUse is the server's memory that grows with streams: heap spans in
// use and goroutine stacks, after the collector has run (stacks shrink
// during a collection).
func memInUse() (heap, stacks uint64) {
	for range 4 { // each collection halves a stack using under a quarter of it
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// The memory per idle ACKed stream stays within idleStreamBudget. The
// streams come from another process (this test binary, re-run as a client),
// so only the server's memory is counted; the figure is the scenario (e)
// of BENCHMARKS.md at a smaller scale, measured from the runtime rather
// than RSS.
func TestIdleStreamBudget(t *testing.T) {
	if addr := os.Getenv("XDSD_IDLE_CLIENT"); addr != "" {
		idleClient(addr)
		return
	}
	if testing.Short() {
		t.Skip("opens 2000 streams")
	}
	const streams, conns, clusters = 2000, 20, 10
	d := db.New(db.Hooks{})
	// A logger that formats: the stream's first request logs a line.
	ps := protocol.NewServer(d, protocol.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	addr, conn := protocoltest.Serve(t, ps.Register)
	h := &harness{t: t, db: d, srv: ps, conn: conn}
	names := make([]string, clusters)
	vs := make([]*resource.Variant, clusters)
	for i := range names {
		names[i] = fmt.Sprint("c-", i)
		vs[i] = cluster(names[i])
	}
	h.put(vs...)
	// One stream first, so that one-time allocations are in the baseline.
	warm := h.sotw(node("warm", nil))
	warm.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: names})
	warm.Recv()
	warm.Close()
	waitNoClients(t, h)
	baseHeap, baseStacks := memInUse()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestIdleStreamBudget$")
	cmd.Env = append(os.Environ(), "XDSD_IDLE_CLIENT="+addr, fmt.Sprintf("XDSD_IDLE_SHAPE=%d,%d,%s", streams, conns, strings.Join(names, ",")))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close() // the client exits when its stdin closes
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("client: %q %v", line, err)
	}
	// The client has sent its ACKs; wait until the server has applied them.
	deadline := time.Now().Add(time.Minute)
	for acked(ps) < streams {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams ACKed", acked(ps), streams)
		}
		time.Sleep(20 * time.Millisecond) // polling the server's state: no event announces an ACK
	}
	heap, stacks := memInUse()
	perHeap := float64(int64(heap)-int64(baseHeap)) / streams
	perStack := float64(int64(stacks)-int64(baseStacks)) / streams
	t.Logf("per idle stream: %.1f KiB heap + %.1f KiB goroutine stacks = %.1f KiB (budget %d KiB); %d goroutines for %d streams",
		perHeap/1024, perStack/1024, (perHeap+perStack)/1024, idleStreamBudget>>10, runtime.NumGoroutine(), streams)
	if perHeap+perStack > idleStreamBudget {
		t.Errorf("an idle stream costs %.1f KiB, over the budget of %d KiB", (perHeap+perStack)/1024, idleStreamBudget>>10)
	}
}

// acked counts the streams whose client has ACKed what it was sent.
func acked(ps *protocol.Server) int {
	n := 0
	for _, c := range ps.Clients() {
		if len(c.Types) == 1 && c.Types[0].SentVersion != "" && c.Types[0].AckedVersion == c.Types[0].SentVersion {
			n++
		}
	}
	return n
}

// idleClient is TestIdleStreamBudget's client process: it opens the streams,
// ACKs the first response on each, says "ready" and holds them until its
// stdin closes.
func idleClient(addr string) {
	shape := strings.Split(os.Getenv("XDSD_IDLE_SHAPE"), ",")
	streams, _ := strconv.Atoi(shape[0])
	nconns, _ := strconv.Atoi(shape[1])
	names := shape[2:]
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "idle client:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var clients []discoveryv3.AggregatedDiscoveryServiceClient
	for range nconns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fail(err)
		}
		clients = append(clients, discoveryv3.NewAggregatedDiscoveryServiceClient(cc))
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := clients[i%nconns].StreamAggregatedResources(ctx)
			if err == nil {
				err = st.Send(&discoveryv3.DiscoveryRequest{Node: node(fmt.Sprint("idle-", i), nil), TypeUrl: resource.ClusterURL, ResourceNames: names})
			}
			var r *discoveryv3.DiscoveryResponse
			if err == nil {
				r, err = st.Recv()
			}
			if err == nil {
				err = st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resource.ClusterURL, ResourceNames: names, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		fail(err)
	default:
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
