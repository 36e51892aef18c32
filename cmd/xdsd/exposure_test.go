package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

// Issue 27 point 12, the attack: a relay started without --policy (and
// without mTLS) hands the private keys it relays to any downstream client
// that asks, with nothing said. It still does — a relay serves what its
// clients ask for — but it says so at start, naming the flag that stops
// it.
func TestRelayWithoutPolicyServesSecretsAndSaysSo(t *testing.T) {
	upstream, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, t.TempDir(), "s.yaml", secretDoc)); code != 0 {
		t.Fatal(errOut)
	}
	var f relayFlags
	f.upstream, f.transport, f.nodeID = upstream, "delta", "relay"
	f.xdsAddr, f.adminAddr = "127.0.0.1:0", ""
	f.maxSubs, f.maxMsg, f.rate, f.burst = 1000, 4<<20, 1000, 1000
	logs := &syncBuffer{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	up, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- serveRelay(ctx, f, slog.New(slog.NewTextHandler(logs, nil)), func(x, _ string) { up <- x })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
	var relay string
	select {
	case relay = <-up:
	case err := <-done:
		t.Fatalf("relay: %v", err)
	}
	logs.await(t, "the relay serves every Secret it relays (private keys) to any downstream client that reaches --xds-addr")

	// Any client that reaches the relay, no certificate, no identity.
	conn, err := grpc.NewClient(relay, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := protocoltest.NewDelta(t, conn, protocoltest.Node("anyone", nil))
	d.Sub(resource.SecretURL, "server_cert")
	r := d.Recv()
	if len(r.Resources) != 1 || !strings.Contains(string(r.Resources[0].Resource.Value), "PRIVATE KEY") {
		t.Fatalf("the relay did not serve the secret: %s", protocoltest.Describe(r))
	}
	d.Close()
}
