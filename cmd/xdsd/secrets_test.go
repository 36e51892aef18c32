package main

import (
	"context"
	"strings"
	"testing"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsd/xdsd/internal/redact"
	"github.com/xdsd/xdsd/internal/testutil/protocoltest"
	"github.com/xdsd/xdsd/resource"
)

const privateKey = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\n-----END PRIVATE KEY-----\\n"

const secretDoc = `"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret
name: server_cert
tls_certificate:
  certificate_chain: {inline_string: "-----BEGIN CERTIFICATE-----\\npublic\\n-----END CERTIFICATE-----\\n"}
  private_key: {inline_string: "` + privateKey + `"}
`

// Secrets (udpa.annotations.sensitive fields) show as digests in every
// admin output, CSDS and xdsd get; the xDS client itself gets them whole.
func TestSecretsStaySecret(t *testing.T) {
	xds, adm := startServe(t)
	dir := t.TempDir()
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "s.yaml", secretDoc)); code != 0 {
		t.Fatal(errOut)
	}
	edited := strings.Replace(secretDoc, "MIIEvQ", "MIIEvR", 1)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", writeFile(t, dir, "s.yaml", edited)); code != 0 {
		t.Fatal(errOut)
	}
	conn, err := grpc.NewClient(xds, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	d := protocoltest.NewDelta(t, conn, protocoltest.Node("envoy-1", nil))
	d.Sub(resource.SecretURL, "server_cert")
	r := d.Recv()
	d.Ack(r)
	if len(r.Resources) != 1 || !strings.Contains(string(r.Resources[0].Resource.Value), "PRIVATE KEY") {
		t.Fatalf("the xDS client did not get its secret whole: %s", protocoltest.Describe(r))
	}

	outputs := map[string]string{}
	for _, p := range []string{"/v1/resources", "/v1/diff?from=1&to=2", "/v1/history", "/v1/audit", "/", "/v1/clients"} {
		code, body := httpGet(t, "http://"+adm+p)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		outputs["GET "+p] = body
	}
	for _, args := range [][]string{{"get", "--server", xds, "-o", "json", "sds", "server_cert"}, {"diff", "--admin", adm, "1", "2"}, {"status", "--admin", adm}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
		outputs[strings.Join(args[:1], " ")] = out
	}
	csds, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(context.Background(), &statusv3.ClientStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	outputs["CSDS"] = protojson.Format(csds)
	for what, out := range outputs {
		if strings.Contains(out, "MIIEv") {
			t.Errorf("%s shows the private key:\n%s", what, out)
		}
	}
	digest := redact.Digest([]byte(strings.ReplaceAll(strings.Replace(privateKey, "MIIEvQ", "MIIEvR", 1), `\n`, "\n")))
	for _, what := range []string{"GET /v1/resources", "get", "CSDS"} {
		if !strings.Contains(outputs[what], strings.TrimSuffix(strings.TrimPrefix(digest, "["), "]")) {
			t.Errorf("%s lacks the digest %s:\n%s", what, digest, outputs[what])
		}
	}
	if !strings.Contains(outputs["diff"], "redacted hmac:") {
		t.Errorf("diff does not show the key changed (as digests):\n%s", outputs["diff"])
	}
}
