package resource

// The authoring format resolves google.protobuf.Any payloads (typed_config
// and the like) through the global protobuf registry, so every extension an
// author may reference must be linked in. extensions_gen.go imports every
// package of the Envoy and CNCF xDS API modules that defines messages, as
// Istio and Envoy Gateway do: a hand-picked list turned away the
// tls_inspector listener filter, ext_proc, OpenTelemetry access logs and
// TypedStruct, among many others.

//go:generate go run ./internal/protomod/gen
