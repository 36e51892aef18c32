package main

import (
	"strings"
	"testing"
)

// Bad flag values and stray arguments are usage errors (exit 2) naming the
// flag and what it accepts, before anything starts.
func TestFlagValueErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--max-msg-size", "0"}, "--max-msg-size 0: want at least 1"},
		{[]string{"serve", "--max-msg-size", "-1"}, "--max-msg-size -1: want at least 1"},
		{[]string{"serve", "--max-subscriptions", "-5"}, "--max-subscriptions -5: want at least 1"},
		{[]string{"serve", "--max-subscriptions", "0"}, "--max-subscriptions 0: want at least 1"},
		{[]string{"serve", "--max-subscription-bytes", "0"}, "--max-subscription-bytes 0: want at least 1"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--max-connection-subscription-bytes", "-1"}, "--max-connection-subscription-bytes -1: want at least 1"},
		{[]string{"serve", "--max-connection-request-bytes", "1000"}, "--max-connection-request-bytes 1000: want at least --max-msg-size (16777216 bytes)"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--max-msg-size", "100", "--max-connection-request-bytes", "99"}, "--max-connection-request-bytes 99: want at least --max-msg-size (100 bytes)"},
		{[]string{"serve", "--request-rate", "-1"}, "--request-rate -1: want a finite number greater than 0"},
		{[]string{"serve", "--request-rate", "0"}, "--request-rate 0: want a finite number greater than 0"},
		{[]string{"serve", "--request-rate", "NaN"}, "--request-rate NaN: want a finite number greater than 0"},
		{[]string{"serve", "--request-rate", "+Inf"}, "--request-rate +Inf: want a finite number greater than 0"},
		{[]string{"serve", "--request-burst", "-3"}, "--request-burst -3: want at least 1"},
		{[]string{"serve", "--watch-interval", "-1s"}, "--watch-interval -1s: want a positive duration"},
		{[]string{"serve", "--watch-interval", "0"}, "--watch-interval 0s: want a positive duration"},
		{[]string{"serve", "extra-arg"}, `unexpected argument "extra-arg"`},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--max-msg-size", "0"}, "--max-msg-size 0: want at least 1"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--request-burst", "0"}, "--request-burst 0: want at least 1"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "extra-arg"}, `unexpected argument "extra-arg"`},
		{[]string{"validate", "-f", "x.yaml", "y.yaml"}, `unexpected argument "y.yaml"`},
		{[]string{"apply", "-f", "x.yaml", "y.yaml"}, `unexpected argument "y.yaml"`},
		{[]string{"apply", "--client", "curl", "-f", "x.yaml"}, `--client: unknown client "curl": want auto, envoy, grpc or none`},
		{[]string{"validate", "--client", "curl", "-f", "x.yaml"}, `--client: unknown client "curl": want auto, envoy, grpc or none`},
		{[]string{"import"}, "want one Envoy bootstrap file, got 0 arguments"},
		{[]string{"import", "a.yaml", "b.yaml"}, "want one Envoy bootstrap file, got 2 arguments"},
		{[]string{"serve", "--max-batch-bytes", "0"}, "--max-batch-bytes 0: want a positive number of bytes"},
		{[]string{"delete", "cds", "a", "b"}, "want TYPE NAME, got 3 arguments"},
		{[]string{"get", "--timeout", "0", "cds", "a"}, "--timeout 0s: want a positive duration"},
		{[]string{"get", "--timeout", "-1s", "cds", "a"}, "--timeout -1s: want a positive duration"},
		{[]string{"watch", "--timeout", "0", "cds", "a"}, "--timeout 0s: want a positive duration"},
		{[]string{"get", "--server", "127.0.0.1:1", "--bootstrap", "b.json", "cds", "a"}, "give at most one of --server ADDR and --bootstrap FILE"},
		{[]string{"watch", "--server", "127.0.0.1:1", "--bootstrap", "b.json", "cds", "a"}, "give at most one of --server ADDR and --bootstrap FILE"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--bootstrap", "b.json"}, "give exactly one of --upstream ADDR and --bootstrap FILE"},
		{[]string{"relay", "--upstream", "127.0.0.1:1", "--cache-linger", "-1s"}, "--cache-linger -1s: want a duration of 0 or more"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			want := "xdsd " + tc.args[0] + ": " + tc.want
			if code != 2 || out != "" || !strings.HasPrefix(errOut, want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and stderr starting %q", code, out, errOut, want)
			}
		})
	}
}

// The help of the daemons' limits says what they accept.
func TestLimitFlagsHelp(t *testing.T) {
	for _, cmd := range []string{"serve", "relay"} {
		_, out, _ := runCmd(t, cmd, "-h")
		for _, w := range []string{"subscriptions one stream may hold (at least 1)", "in bytes (at least 1)",
			"sustain (greater than 0)", "in a burst (at least 1)"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, w, out)
			}
		}
	}
}

// Mistakes get a way out: a suggestion for a mistyped command or flag, -f
// for a path given without it, and `help CMD` for a command's flags.
func TestSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{[]string{"serv"}, 2, `unknown command "serv" (did you mean "serve"?)`},
		{[]string{"valdate"}, 2, `did you mean "validate"?`},
		{[]string{"get", "--sever", "x", "cds", "a"}, 2, `did you mean "--server"?`},
		{[]string{"get", "--zzz", "cds", "a"}, 2, "xdsd get -h lists the flags"},
		{[]string{"apply", "examples"}, 2, "did you mean -f examples?"},
		{[]string{"validate", "examples"}, 2, "did you mean -f examples?"},
		{[]string{"help", "get"}, 0, "usage: xdsd get"},
		{[]string{"help"}, 0, "xdsd help <command>"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.out) {
			t.Errorf("xdsd %v: exit %d, %q; want exit %d and %q", c.args, code, out+errOut, c.code, c.out)
		}
	}
}

// Every command's help works both ways, `xdsd help CMD` and `xdsd CMD -h`:
// exit 0, the synopsis on standard output, nothing on standard error.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}} {
			code, out, errOut := runCmd(t, args...)
			if code != 0 || !strings.Contains(out, "xdsd "+c.name) || errOut != "" {
				t.Errorf("xdsd %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
			}
		}
	}
}
