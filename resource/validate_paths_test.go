package resource_test

import (
	"io"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xdsd/xdsd/internal/docprep"
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

// keeping is a source whose documents are prepared (docprep.Reader):
// it keeps the last document and the Any values its validation decoded.
type keeping struct {
	io.Reader
	d    *resource.Document
	anys *docprep.Anys
}

func (k *keeping) Prepare(d *resource.Document, anys *docprep.Anys) { k.d, k.anys = d, anys }

// A docprep.Reader is handed, with each document, the contents of its Any
// values as validation decoded them (the same message each time); they
// decode any other, and a nil set (a document decoded without a
// docprep.Reader) decodes everything.
func TestPreparedAnys(t *testing.T) {
	const src = `"@type": type.googleapis.com/envoy.config.listener.v3.Listener
name: l
address: {socket_address: {address: 0.0.0.0, port_value: 80}}
filter_chains:
- filters:
  - name: hcm
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: in
      rds: {route_config_name: r, config_source: {ads: {}}}
      http_filters: [{name: router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
`
	k := &keeping{Reader: strings.NewReader(src)}
	var d *resource.Document
	err := resource.DecodeReader("l.yaml", k, resource.Auto, func(doc *resource.Document) error { d = doc; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if k.d != d || k.anys == nil {
		t.Fatalf("prepared %p with %v, want the document handed on (%p) with its Any values", k.d, k.anys, d)
	}
	a := d.Message.(*listenerv3.Listener).GetFilterChains()[0].GetFilters()[0].GetTypedConfig()
	m1, err := k.anys.Unpack(a)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := k.anys.Unpack(a)
	want, _ := a.UnmarshalNew()
	if m1 != m2 || !proto.Equal(m1, want) {
		t.Errorf("Unpack: %v and %v, want the same message, equal to %v", m1, m2, want)
	}
	var none *docprep.Anys
	if m, err := none.Unpack(a); err != nil || !proto.Equal(m, want) || m == m1 {
		t.Errorf("Unpack without kept values: %v %v", m, err)
	}
	other, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := k.anys.Unpack(other); err != nil || m.(*hcmv3.HttpConnectionManager).GetStatPrefix() != "other" {
		t.Errorf("an Any not in the document: %v %v", m, err)
	}
}
