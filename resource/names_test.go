package resource

import (
	"strings"
	"testing"
)

// TP1 reserves the xds. namespace of context parameters for the client;
// the check ignores case, since "XDS.node.id" reads as the client's own
// parameter to anyone looking at the name.
func TestCheckNameReservedParams(t *testing.T) {
	cluster := ForURL(ClusterURL)
	const base = "xdstp://a/envoy.config.cluster.v3.Cluster/x?"
	tests := []struct {
		query    string
		reserved string // the key the error names; "" means accepted
	}{
		{"xds.node.id=1", "xds.node.id"},
		{"XDS.node.id=1", "XDS.node.id"},
		{"Xds.shard=1", "Xds.shard"},
		{"a=1&xDs.=2", "xDs."},
		{"xds=1", ""},
		{"xdsx.a=1", ""},
		{"my.xds.a=1", ""},
		// TP1 computed parameters may be authored (lower case: keys are
		// case-sensitive, and only xds.resource.* is computed).
		{"xds.resource.vip=96.54.3.1", ""},
		{"bar=baz&xds.resource.vip=96.54.3.1", ""},
		{"XDS.resource.vip=1", "XDS.resource.vip"},
		{"xds.resource.=1", "xds.resource."},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			canon, err := CheckName(cluster, base+tt.query)
			if tt.reserved == "" {
				if err != nil {
					t.Errorf("CheckName: %v", err)
				}
				return
			}
			want := `context parameter "` + tt.reserved + `" is in the reserved xds. namespace`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CheckName = %q, %v; want an error containing %q", canon, err, want)
			}
		})
	}
}
