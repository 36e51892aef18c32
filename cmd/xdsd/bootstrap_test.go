package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A bootstrap naming a server with no channel_creds type xdsd supports,
// top-level or an authority's, stops relay at startup and get and watch
// before they ask anything: exit 1, naming the file, the server and its
// authority.
func TestUnsupportedChannelCreds(t *testing.T) {
	t.Setenv("GRPC_XDS_BOOTSTRAP", "")
	t.Setenv("GRPC_XDS_BOOTSTRAP_CONFIG", "")
	dir := t.TempDir()
	top := writeFile(t, dir, "top.json", `{"xds_servers":[{"server_uri":"127.0.0.1:18000","channel_creds":[{"type":"bogus"}]}]}`)
	auth := writeFile(t, dir, "auth.json", `{"xds_servers":[{"server_uri":"127.0.0.1:18000","channel_creds":[{"type":"insecure"}]}],
  "authorities":{"a.example":{"xds_servers":[{"server_uri":"127.0.0.1:18002","channel_creds":[{"type":"google_default"}]}]}}}`)
	topWant := `bootstrap ` + top + `: xds_servers[0].channel_creds: server "127.0.0.1:18000": no supported channel_creds type in ["bogus"]`
	authWant := `bootstrap ` + auth + `: authorities["a.example"].xds_servers[0].channel_creds: server "127.0.0.1:18002": no supported channel_creds type in ["google_default"]`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"relay", "--bootstrap", top, "--xds-addr", "127.0.0.1:0", "--admin-addr", ""}, topWant},
		{[]string{"relay", "--bootstrap", auth, "--xds-addr", "127.0.0.1:0", "--admin-addr", ""}, authWant},
		{[]string{"get", "--bootstrap", top, "--timeout", "200ms", "lds", "wa"}, topWant},
		{[]string{"get", "--bootstrap", auth, "--timeout", "200ms", "lds", "wa"}, authWant},
		{[]string{"watch", "--bootstrap", top, "lds", "wa"}, topWant},
	} {
		t.Run(tc.args[0]+" "+filepath.Base(tc.args[2]), func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			want := "xdsd " + tc.args[0] + ": " + tc.want
			if code != 1 || out != "" || !strings.HasPrefix(errOut, want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and stderr starting %q", code, out, errOut, want)
			}
		})
	}
	// From the environment, the error names the variable.
	t.Setenv("GRPC_XDS_BOOTSTRAP_CONFIG", `{"xds_servers":[{"server_uri":"e:1","channel_creds":[{"type":"bogus"}]}]}`)
	code, _, errOut := runCmd(t, "get", "--timeout", "200ms", "lds", "wa")
	if want := `xdsd get: bootstrap GRPC_XDS_BOOTSTRAP_CONFIG: xds_servers[0].channel_creds: server "e:1"`; code != 1 || !strings.HasPrefix(errOut, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
}

// A name the server has not answered when --timeout passes is printed as
// unanswered, not as absent; one the server says does not exist is.
func TestGetNoAnswer(t *testing.T) {
	xds, _ := startServe(t)
	// SotW has no word for a route configuration that does not exist.
	code, out, errOut := runCmd(t, "get", "--server", xds, "--timeout", "300ms", "rds", "nope")
	if code != 1 || !strings.Contains(out, "name: nope\nstatus: no-answer\n") || strings.Contains(out, "does-not-exist") ||
		!strings.Contains(errOut, "xdsd get: no answer within --timeout 300ms for nope") {
		t.Errorf("SotW rds: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// Delta does, and so does SotW for clusters.
	for _, args := range [][]string{{"--delta", "rds"}, {"cds"}} {
		code, out, errOut := runCmd(t, append([]string{"get", "--server", xds, "--timeout", "5s"}, append(args, "nope")...)...)
		if code != 1 || !strings.Contains(out, "name: nope\nstatus: does-not-exist\n") {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errOut)
		}
	}
}
