// Package meshgen writes large, realistic resource sets for tests and
// benchmarks: clusters shaped like those Istio sends every sidecar (EDS,
// circuit breakers, outlier detection, mTLS by SDS, metadata), about
// 1.2 KB of JSON each.
package meshgen

import (
	"bufio"
	"fmt"
	"io"
)

// clusterJSON is one cluster; %[1]d is its number.
const clusterJSON = `{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster",` +
	`"name":"outbound|8080||svc-%[1]d.ns-%[2]d.svc.cluster.local","type":"EDS",` +
	`"eds_cluster_config":{"eds_config":{"ads":{}},` +
	`"service_name":"outbound|8080||svc-%[1]d.ns-%[2]d.svc.cluster.local"},` +
	`"connect_timeout":"10s","lb_policy":"LEAST_REQUEST",` +
	`"circuit_breakers":{"thresholds":[{"max_connections":4294967295,"max_pending_requests":4294967295,` +
	`"max_requests":4294967295,"max_retries":4294967295}]},` +
	`"outlier_detection":{"consecutive_5xx":5,"interval":"10s","base_ejection_time":"30s","max_ejection_percent":10},` +
	`"metadata":{"filter_metadata":{"istio":{"services":[{"host":"svc-%[1]d.ns-%[2]d.svc.cluster.local",` +
	`"name":"svc-%[1]d","namespace":"ns-%[2]d"}]}}},` +
	`"transport_socket_matches":[{"name":"tlsMode-istio","match":{"tlsMode":"istio"},` +
	`"transport_socket":{"name":"envoy.transport_sockets.tls","typed_config":{` +
	`"@type":"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",` +
	`"common_tls_context":{` +
	`"tls_certificate_sds_secret_configs":[{"name":"default","sds_config":` + sdsGRPC + `}],` +
	`"combined_validation_context":{"default_validation_context":{"match_subject_alt_names":[{"exact":"spiffe://cluster.local/ns/ns-%[2]d/sa/svc-%[1]d"}]},` +
	`"validation_context_sds_secret_config":{"name":"ROOTCA","sds_config":` + sdsGRPC + `}}},` +
	`"sni":"outbound_.8080_._.svc-%[1]d.ns-%[2]d.svc.cluster.local"}}}]}`

// sdsGRPC is where Istio's sidecars get their certificates: the node
// agent, by the sds-grpc cluster, not the control plane.
const sdsGRPC = `{"api_config_source":{"api_type":"GRPC","grpc_services":[{"envoy_grpc":{"cluster_name":"sds-grpc"}}]}}`

// endpointsJSON is cluster i's endpoints; %[1]d is its number.
const endpointsJSON = `{"@type":"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",` +
	`"cluster_name":"outbound|8080||svc-%[1]d.ns-%[2]d.svc.cluster.local",` +
	`"endpoints":[{"locality":{"region":"us-east1","zone":"us-east1-b"},"load_balancing_weight":1,"lb_endpoints":[` +
	`{"endpoint":{"address":{"socket_address":{"address":"10.%[3]d.%[4]d.%[5]d","port_value":8080}}},` +
	`"metadata":{"filter_metadata":{"istio":{"workload":"svc-%[1]d-v1;ns-%[2]d;svc-%[1]d;v1;cluster-a"}}},"load_balancing_weight":1}]}]}`

// Cluster returns cluster i as one line of JSON.
func Cluster(i int) string { return fmt.Sprintf(clusterJSON, i, i%100) }

// Endpoints returns cluster i's endpoints as one line of JSON.
func Endpoints(i int) string {
	return fmt.Sprintf(endpointsJSON, i, i%100, i>>16&255, i>>8&255, i&255)
}

// Mesh writes a JSON array of n resources: n/2 clusters, each followed by
// its endpoints, a set every client check accepts.
func Mesh(w io.Writer, n int) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[\n")
	for i := range n {
		if i > 0 {
			bw.WriteString(",\n")
		}
		if i%2 == 0 {
			bw.WriteString(Cluster(i / 2))
		} else {
			bw.WriteString(Endpoints(i / 2))
		}
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}

// Clusters writes a JSON array of n clusters, one a line.
func Clusters(w io.Writer, n int) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[\n")
	for i := range n {
		if i > 0 {
			bw.WriteString(",\n")
		}
		bw.WriteString(Cluster(i))
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}

// YAML is a way to write a set as YAML.
type YAML int

const (
	// Flow writes each resource as its one line of JSON (which is YAML's
	// flow style), the documents separated by "---".
	Flow YAML = iota
	// Block writes each resource in YAML's block style, as people write
	// it, the documents separated by "---".
	Block
)

// ClustersYAML writes n clusters as YAML documents separated by "---".
func ClustersYAML(w io.Writer, n int, style YAML) error {
	return writeYAML(w, n, style, Cluster)
}

// MeshYAML writes what Mesh writes as YAML documents separated by "---".
func MeshYAML(w io.Writer, n int, style YAML) error {
	return writeYAML(w, n, style, func(i int) string {
		if i%2 == 0 {
			return Cluster(i / 2)
		}
		return Endpoints(i / 2)
	})
}

func writeYAML(w io.Writer, n int, style YAML, res func(int) string) error {
	bw := bufio.NewWriter(w)
	for i := range n {
		if i > 0 {
			bw.WriteString("---\n")
		}
		js := res(i)
		if style == Block {
			var err error
			if js, err = blockYAML(js); err != nil {
				return err
			}
			bw.WriteString(js)
			continue
		}
		bw.WriteString(js)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// UnitVariants is how many variants a unit of Variants holds: four
// clusters with their endpoints, the last cluster's endpoints in three
// TP2 variants (zone=a, zone=b, zone=c).
const UnitVariants = 10

// Variants writes part k (from 0) of parts of a mesh of n variants (n
// rounded down to a multiple of UnitVariants) as a JSON array: units of
// four clusters, each followed by its endpoints, the fourth's endpoints
// as three variants for clients in different zones. Every client check
// passes but the warning that clients without a zone have no endpoints
// for the fourth cluster; the parts together are the whole mesh.
func Variants(w io.Writer, n, k, parts int) error {
	units := n / UnitVariants
	from, to := units*k/parts, units*(k+1)/parts
	bw := bufio.NewWriter(w)
	bw.WriteString("[\n")
	first := true
	put := func(s string) {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		bw.WriteString(s)
	}
	for u := from; u < to; u++ {
		for c := 4 * u; c < 4*u+4; c++ {
			put(Cluster(c))
			if c < 4*u+3 {
				put(Endpoints(c))
				continue
			}
			for z, zone := range []string{"a", "b", "c"} {
				eps := fmt.Sprintf(endpointsJSON, c, c%100, c>>16&255, c>>8&255, (c+z)&255)
				put(fmt.Sprintf(`{"name":"outbound|8080||svc-%d.ns-%d.svc.cluster.local","constraints":"zone=%s","resource":%s}`, c, c%100, zone, eps))
			}
		}
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}
