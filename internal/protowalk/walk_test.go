package protowalk

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Anys finds every Any in an encoding, inside Any values too, with its
// field path: list elements counted per field, map entries by key.
func TestAnys(t *testing.T) {
	router := mustAny(t, &routerv3.Router{})
	hcm := mustAny(t, &hcmv3.HttpConnectionManager{
		StatPrefix: "in",
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "a", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &structpb.Struct{})}},
			{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}},
		},
	})
	l := &listenerv3.Listener{
		Name: "l",
		FilterChains: []*listenerv3.FilterChain{
			{Filters: []*listenerv3.Filter{{Name: "x"}}},
			{Filters: []*listenerv3.Filter{
				{Name: "y"},
				{Name: "hcm", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}},
			}},
		},
		ListenerFilters: []*listenerv3.ListenerFilter{
			{Name: "tls", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: router}},
		},
	}
	c := &clusterv3.Cluster{
		Name: "c",
		Metadata: &corev3.Metadata{TypedFilterMetadata: map[string]*anypb.Any{
			`a "key"`: router,
		}},
	}
	for _, tc := range []struct {
		m    proto.Message
		want []string
	}{
		{l, []string{
			"filter_chains[1].filters[1].typed_config type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
			"filter_chains[1].filters[1].typed_config.http_filters[0].typed_config type.googleapis.com/google.protobuf.Struct",
			"filter_chains[1].filters[1].typed_config.http_filters[1].typed_config type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
			"listener_filters[0].typed_config type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
		}},
		{c, []string{`metadata.typed_filter_metadata["a \"key\""] type.googleapis.com/envoy.extensions.filters.http.router.v3.Router`}},
	} {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		Anys(b, tc.m.ProtoReflect().Descriptor(), func(url string, path func() string) {
			got = append(got, path()+" "+url)
		})
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%T: got\n%q\nwant\n%q", tc.m, got, tc.want)
		}
	}
}
