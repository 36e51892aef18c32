package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func plainConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// `xdsd version` names the VCS revision the binary was built from.
func TestVersion(t *testing.T) {
	code, out, _ := runXdsd(t, "version")
	if code != 0 || !strings.HasPrefix(out, "xdsd ") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if rev := strings.TrimSpace(string(head)); !strings.Contains(out, rev) {
			t.Errorf("version %q does not name the checkout's revision %s", out, rev)
		}
	}
	if code, out2, _ := runXdsd(t, "--version"); code != 0 || out2 != out {
		t.Errorf("--version: exit %d, %q; want %q", code, out2, out)
	}
}

// The xDS port answers standard tools: grpc.health.v1 says SERVING once
// the store is loaded, and server reflection lists the xDS, CSDS and
// health services (what grpcurl needs to list and describe them).
func TestHealthAndReflection(t *testing.T) {
	for _, role := range []string{"serve", "relay"} {
		t.Run(role, func(t *testing.T) {
			x := startXdsd(t)
			addr := x.xds
			if role == "relay" {
				addr = startRelay(t, x.xds).xds
			}
			conn := plainConn(t, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v, %v", h, err)
			}
			st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
				t.Fatal(err)
			}
			resp, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range resp.GetListServicesResponse().GetService() {
				names = append(names, s.GetName())
			}
			sort.Strings(names)
			for _, want := range []string{
				"envoy.service.discovery.v3.AggregatedDiscoveryService",
				"envoy.service.cluster.v3.ClusterDiscoveryService",
				"envoy.service.status.v3.ClientStatusDiscoveryService",
				"grpc.health.v1.Health",
			} {
				if !contains(strings.Join(names, " "), want) {
					t.Errorf("reflection lists %v, without %s", names, want)
				}
			}
			// And describes one: the file defining CSDS.
			if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{
				FileContainingSymbol: "envoy.service.status.v3.ClientStatusDiscoveryService"}}); err != nil {
				t.Fatal(err)
			}
			if resp, err := st.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
				t.Errorf("describing CSDS: %v, %v", resp, err)
			}
			st.CloseSend()
		})
	}
}

// A CSDS fetch from the server lists a real grpc-go client with every
// resource of its chain ACKed.
func TestCSDSWithGRPCClient(t *testing.T) {
	be := startBackend(t)
	x := startXdsd(t)
	x.apply(t, withPorts(t, "quickstart", map[int]int{50051: be.port}))
	until(t, dial(t, "xds:///quickstart", bootstrap(x.xds, nil, nil)), be.addr)

	csds := statusv3.NewClientStatusDiscoveryServiceClient(plainConn(t, x.xds))
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := csds.FetchClientStatus(context.Background(), &statusv3.ClientStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		acked := map[string]bool{}
		for _, cc := range resp.GetConfig() {
			if !strings.HasPrefix(cc.GetNode().GetId(), "e2e-") {
				continue
			}
			for _, g := range cc.GetGenericXdsConfigs() {
				if g.GetClientStatus() == adminv3.ClientResourceStatus_ACKED {
					acked[g.GetTypeUrl()] = true
				}
			}
		}
		if len(acked) == 4 { // listener, route, cluster, endpoints
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CSDS shows ACKs for %v; want the four types of the quickstart chain", acked)
		}
		time.Sleep(20 * time.Millisecond) // polling: an ACK is no event a test can wait on
	}
}

// apply --wait against a real grpc-go xDS client: a change it takes
// returns 0 once it ACKs; a route it rejects returns 3 with grpc-go's
// reason and the client's node id.
func TestApplyWaitWithGRPCClient(t *testing.T) {
	b := startBackend(t)
	x := startXdsd(t)
	x.apply(t, chainYAML("wait", b.port))
	conn := dial(t, "xds:///wait", bootstrap(x.xds, nil, nil))
	until(t, conn, b.addr)
	dir := t.TempDir()
	write := func(yaml string) string {
		p := filepath.Join(dir, "chain.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := strings.Replace(chainYAML("wait", b.port), "route: {cluster: wait}", "route: {cluster: wait, timeout: 7s}", 1)
	code, out, errOut := runXdsd(t, "apply", "--admin", x.admin, "--wait", "--wait-timeout", "30s", "-f", write(good))
	if code != 0 || !strings.Contains(out, "rollout of revision 2: 1 ACKed, 0 NACKed, 0 not answered") {
		t.Fatalf("apply --wait of a route grpc-go takes: exit %d\n%s%s", code, out, errOut)
	}

	bad := strings.Replace(good, "route: {cluster: wait, timeout: 7s}", "route: {cluster: wait, retry_policy: {num_retries: 0}}", 1)
	code, out, errOut = runXdsd(t, "apply", "--admin", x.admin, "--client", "none", "--wait", "--wait-timeout", "30s", "-f", write(bad))
	if code != 3 || !strings.Contains(out, "0 ACKed, 1 NACKed, 0 not answered") || !strings.Contains(out, "NACKED   rds") ||
		!strings.Contains(out, "num_retries = 0; must be >= 1") || !strings.Contains(errOut, "1 client NACKed revision 3") {
		t.Fatalf("apply --wait of a route grpc-go rejects: exit %d\n%s%s", code, out, errOut)
	}
}
