package resource_test

import (
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/resource"
)

// A finding's path counts the elements of each repeated field apart,
// inside an Any too, in messages with more fields than the walk keeps
// counters for on its stack (a listener has over 16).
func TestValidatePathsCountEachList(t *testing.T) {
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "in",
		HttpFilters: []*hcmv3.HttpFilter{
			{Name: "envoy.filters.http.router"},
			{Name: ""}, // invalid: a filter needs a name
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &listenerv3.Listener{
		Name: "l",
		FilterChains: []*listenerv3.FilterChain{
			{Name: "first"},
			{Name: "second", Filters: []*listenerv3.Filter{
				{Name: "a"}, {Name: "b"},
				{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}},
			}},
		},
		// A list after another: its elements are counted from 0.
		ListenerFilters: []*listenerv3.ListenerFilter{
			{Name: "x"},
			{Name: "y", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: hcm}},
		},
	}
	var paths []string
	for _, f := range resource.Validate(l) {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{
		"filter_chains[1].filters[2].typed_config.http_filters[1].name",
		"listener_filters[1].typed_config.http_filters[1].name",
	} {
		found := false
		for _, p := range paths {
			found = found || p == want
		}
		if !found {
			t.Errorf("findings at %s, want one at %s", strings.Join(paths, ", "), want)
		}
	}
}
