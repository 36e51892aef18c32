package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/xds"
)

// Nothing the program or the test started outlives the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A real grpc-go xDS client reaches a registered service's backend
// through the program, and follows the registry when the service moves.
func TestRegistryServesGRPCClient(t *testing.T) {
	a, b := startBackend(t), startBackend(t)
	dir := t.TempDir()
	write := func(port int) {
		// Written aside and renamed, as a registry should, so that a read
		// never sees half a file.
		tmp := filepath.Join(dir, ".greeter.tmp")
		body := fmt.Sprintf("name: greeter\nport: %d\nendpoints: [127.0.0.1]\n", port)
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "greeter.service")); err != nil {
			t.Fatal(err)
		}
	}
	write(a.port)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, Registry{Dir: dir}, lis, 50*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	conn := dial(t, "xds:///greeter", lis.Addr().String())
	defer conn.Close()
	until(t, conn, a.addr)
	write(b.port)
	until(t, conn, b.addr)
}

type backend struct {
	addr string
	port int
}

func startBackend(t *testing.T) backend {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return backend{addr: lis.Addr().String(), port: lis.Addr().(*net.TCPAddr).Port}
}

// dial builds a grpc-go xDS client channel whose bootstrap names the
// control plane at xdsAddr.
func dial(t *testing.T, target, xdsAddr string) *grpc.ClientConn {
	t.Helper()
	bootstrap, err := json.Marshal(map[string]any{
		"xds_servers": []map[string]any{{"server_uri": xdsAddr, "channel_creds": []map[string]any{{"type": "insecure"}},
			"server_features": []string{"xds_v3"}}},
		"node": map[string]any{"id": "embed-test", "locality": map[string]any{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := xds.NewXDSResolverWithConfigForTesting(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// until makes health RPCs until one is served by want, or fails the test
// at the deadline: configuration reaches a gRPC channel asynchronously, so
// the event to wait on is an RPC landing where it should.
func until(t *testing.T, conn *grpc.ClientConn, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var p peer.Peer
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true), grpc.Peer(&p))
		cancel()
		if err == nil && p.Addr.String() == want {
			return
		}
		if err == nil {
			last = p.Addr.String()
		}
		lastErr = err
	}
	t.Fatalf("RPCs never reached %s; last went to %q (err %v)", want, last, lastErr)
}
