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
		{"xds.resource.vip=96.54.3.1", ""}, // computed attributes may be authored
		{"XDS.resource.vip=1", "XDS.resource.vip"},
		{"xds.resourcex=1", "xds.resourcex"},
		{"xds=1", ""},
		{"xdsx.a=1", ""},
		{"my.xds.a=1", ""},
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
				t.Errorf("CheckName = %q, %v; want an error ending %q", canon, err, want)
			}
		})
	}
}

// A name a client is configured with carries no xds.* parameters at all:
// the computed ones are the client's to add.
func TestCheckConfiguredName(t *testing.T) {
	for n, bad := range map[string]bool{
		"xdstp://a/envoy.config.listener.v3.Listener/l?bar=baz":                                           false,
		"xdstp://a/envoy.config.listener.v3.Listener/l?bar=baz&xds.resource.vip=96.54.3.1":                true,
		"xdstp://a/envoy.config.listener.v3.Listener/l?xds.node.id=n":                                     true,
		"legacy-name?xds.resource.vip=1":                                                                  false,
		"xdstp://a/envoy.config.listener.v3.Listener/l#alt=xdstp://b/envoy.config.listener.v3.Listener/l": false,
	} {
		if err := CheckConfiguredName(n); (err != nil) != bad {
			t.Errorf("CheckConfiguredName(%s) = %v, want an error: %v", n, err, bad)
		}
	}
}
