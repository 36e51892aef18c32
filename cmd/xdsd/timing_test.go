package main

import (
	"regexp"
	"strings"
	"testing"
)

// xdsd apply --timing prints one line on standard error: this command's
// steps and the server's phases, in milliseconds; without it, none.
func TestApplyTiming(t *testing.T) {
	_, adm := startServe(t)
	p := writeFile(t, t.TempDir(), "c.yaml", cl+"name: timed\n")
	code, _, errOut := runCmd(t, "apply", "--admin", adm, "--timing", "-f", p)
	if code != 0 {
		t.Fatal(errOut)
	}
	want := regexp.MustCompile(`(?m)^timing \(ms\): prepare=[0-9.]+ connect=[0-9.]+ send=[0-9.]+ wait=[0-9.]+ ` +
		`\(server: staged=[0-9.]+ groups=[0-9.]+ decode=[0-9.]+ checks=[0-9.]+ guard=[0-9.]+ commit=[0-9.]+ served=[0-9.]+ total=[0-9.]+\) ` +
		`answer=[0-9.]+ total=[0-9.]+$`)
	if !want.MatchString(errOut) {
		t.Errorf("stderr %q: want a line matching %s", errOut, want)
	}
	code, _, errOut = runCmd(t, "apply", "--admin", adm, "-f", p)
	if code != 0 || strings.Contains(errOut, "timing") {
		t.Errorf("without --timing: exit %d, stderr %q", code, errOut)
	}
}

func TestServerTimingParsed(t *testing.T) {
	for h, want := range map[string]string{
		"decode;dur=1.204, commit;dur=9.870, total;dur=11.3": " decode=1.2 commit=9.9 total=11.3",
		"cache;desc=\"x\";dur=0.25":                          " cache=0.2",
		"":                                                   "",
		"junk, a;dur=x, b":                                   "",
	} {
		if got := serverTiming(h); got != want {
			t.Errorf("serverTiming(%q) = %q, want %q", h, got, want)
		}
	}
}
