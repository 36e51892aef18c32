package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/testutil"
)

// TestNoCollectionWhileInitialising runs this test binary, which links
// what xdsd links, with the runtime tracing package initialisation and
// collections: internal/tuning/initgc is initialised before the Envoy packages,
// no collection runs until every package is initialised, and the
// collector is on again after (TestCollectorOnAfterInit).
func TestNoCollectionWhileInitialising(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GOGC=") || strings.HasPrefix(e, "GODEBUG=")
	}), "GODEBUG=inittrace=1,gctrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	lastInit, initgc, firstEnvoy := -1, -1, -1
	for i, l := range lines {
		switch {
		case !strings.HasPrefix(l, "init "):
			continue
		case strings.HasPrefix(l, "init github.com/xdsd/xdsd/internal/tuning/initgc "):
			initgc = i
		case strings.HasPrefix(l, "init github.com/envoyproxy/go-control-plane/") && firstEnvoy < 0:
			firstEnvoy = i
		}
		lastInit = i
	}
	if initgc < 0 || firstEnvoy < 0 {
		t.Fatalf("no init line for internal/tuning/initgc (%d) or an Envoy package (%d) in:\n%s", initgc, firstEnvoy, out)
	}
	if initgc > firstEnvoy {
		t.Errorf("internal/tuning/initgc is initialised after an Envoy type package: %q before %q", lines[firstEnvoy], lines[initgc])
	}
	for _, l := range lines[:lastInit] {
		if strings.HasPrefix(l, "gc ") {
			t.Errorf("a collection ran while the packages were initialised: %q", l)
		}
	}
}

// TestCollectorOnAfterInit: the main package's init turned the collector
// back on, and once a collection has run its percentage is GOGC's
// (internal/tuning/initgc raised it only for the first one).
func TestCollectorOnAfterInit(t *testing.T) {
	want := 100
	switch v := os.Getenv("GOGC"); v {
	case "":
	case "off":
		t.Skip("GOGC=off")
	default:
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Skipf("GOGC=%s", v)
		}
		want = n
	}
	runtime.GC()
	gogc := func() int64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	testutil.Eventually(t, fmt.Sprintf("GOGC back to %d after a collection", want), func() bool { return gogc() == int64(want) })
}
