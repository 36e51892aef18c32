package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// Two `xdsd serve` replicas on one etcd, both in the bootstrap's
// xds_servers: a real grpc-go xDS client keeps working when the replica
// it uses is killed (SIGKILL), and a client started then gets its
// configuration, and a change applied through the other replica, from the
// second server of its bootstrap.
func TestGRPCTwoReplicas(t *testing.T) {
	one, two := startBackend(t), startBackend(t)
	c := etcdtest.Start(t, 1)
	url := c.URL("e2e")
	a := startProc(t, "serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--store", url)
	b := startProc(t, "serve", "--xds-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--store", url)
	a.apply(t, withPorts(t, "quickstart", map[int]int{50051: one.port}))

	var bs map[string]any
	if err := json.Unmarshal(bootstrap(a.xds, nil, nil), &bs); err != nil {
		t.Fatal(err)
	}
	servers := bs["xds_servers"].([]any)
	second := map[string]any{}
	for k, v := range servers[0].(map[string]any) {
		second[k] = v
	}
	second["server_uri"] = b.xds
	bs["xds_servers"] = append(servers, second)
	bj, _ := json.Marshal(bs)
	conn := dial(t, "xds:///quickstart", bj)
	until(t, conn, one.addr)

	a.cmd.Process.Kill() // the replica the client uses, mid-stream
	a.cmd.Wait()
	b.apply(t, fmt.Sprintf(`"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
name: second
type: EDS
eds_cluster_config: {eds_config: {ads: {}}}
---
"@type": type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment
cluster_name: second
endpoints:
- locality: {region: local}
  load_balancing_weight: 1
  lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}, load_balancing_weight: 1}]
---
"@type": type.googleapis.com/envoy.config.route.v3.RouteConfiguration
name: quickstart
virtual_hosts:
- name: quickstart
  domains: ["*"]
  routes: [{match: {prefix: ""}, route: {cluster: second}}]
`, two.port))
	// The channel keeps working on what it holds: gRFC A71 has a client
	// that holds its resources keep them and retry the first server,
	// rather than fall back.
	if _, err := rpc(conn, 10*time.Second); err != nil {
		t.Fatalf("the channel stopped working when its replica died: %v", err)
	}
	// A new client, whose first server is dead, falls back to the second
	// replica and gets the change applied through it.
	until(t, dial(t, "xds:///quickstart", bj), two.addr)
}
