// Package clientcheck finds, before anything is served, what a client would
// reject: the checks Envoy or a proxyless gRPC client makes when it loads
// a resource that the schema (and protoc-gen-validate) cannot express,
// and the references that would leave it waiting for a resource that no
// variant provides, for every TP2 parameter set (internal/refs).
//
// Each rule names the client behaviour it predicts and its source, the
// Envoy code or documentation or the gRFC, in a comment; tests pin each
// with a failing and a passing case, and the e2e tests show a real
// grpc-go client NACKing what each gRPC rule refuses.
//
// It imports resource, constraint and internal/refs; the authoring
// commands (validate, apply) and the admin apply endpoint use it.
package clientcheck
