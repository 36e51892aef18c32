package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/constraint"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/store"
)

func TestGet(t *testing.T) {
	xds, adm := startServe(t)
	if code, _, errOut := runCmd(t, "apply", "--admin", adm, "-f", "../../examples"); code != 0 {
		t.Fatal(errOut)
	}
	for _, delta := range []string{"--delta=false", "--delta"} {
		code, out, errOut := runCmd(t, "get", "--server", xds, delta, "--param", "env=prod", "-o", "json", "rds", "tp2", "quickstart")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", delta, code, errOut)
		}
		var rs []Result
		if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 2 {
			t.Fatalf("%s: %v\n%s", delta, err, out)
		}
		// Delta carries each variant's version; SotW only the response's.
		want := store.Version(1, constraint.MustParse("env=prod && version!=v1").Key())
		if delta == "--delta=false" {
			want = "1"
		}
		if rs[0].Name != "tp2" || rs[0].Constraints != "env=prod && version!=v1" || rs[0].Version != want || rs[1].Name != "quickstart" || rs[1].Constraints != "" {
			t.Errorf("%s: %+v", delta, rs)
		}
	}
	// A name that does not exist is shown as such, with exit status 1.
	code, out, _ := runCmd(t, "get", "--server", xds, "--timeout", "200ms", "cds", "quickstart", "nope")
	if code != 1 || !strings.Contains(out, "status: does-not-exist") || !strings.Contains(out, "name: quickstart") {
		t.Errorf("exit %d\n%s", code, out)
	}
	// A glob, over delta.
	code, out, errOut := runCmd(t, "get", "--server", xds, "lds", "xdstp://quickstart.xdsd/envoy.config.listener.v3.Listener/*")
	if code != 0 || !strings.Contains(out, "xdstp://quickstart.xdsd/envoy.config.listener.v3.Listener/quickstart") {
		t.Errorf("glob: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"get", "cds"}, {"get", "-o", "xml", "cds", "a"}, {"get", "--param", "novalue", "cds", "a"}, {"watch", "nosuchtype", "a"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// watch prints every update and removal with a timestamp until
// interrupted.
func TestWatch(t *testing.T) {
	xds, adm := startServe(t)
	apply := func(doc string) {
		t.Helper()
		resp, err := httpPost("http://"+adm+"/v1/apply", doc)
		if err != nil || resp != 200 {
			t.Fatalf("apply: %d %v", resp, err)
		}
	}
	apply(cl + "name: w\nalt_stat_name: one\n")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	typ, _ := resource.Lookup("cds")
	go func() {
		done <- watch(ctx, &getFlags{server: xds, output: "json", params: paramFlags{}, timeout: 5 * time.Second}, typ, []string{"w"}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() Result {
		t.Helper()
		got := make(chan Result, 1)
		go func() {
			var r Result
			if lines.Scan() {
				json.Unmarshal(lines.Bytes(), &r)
			}
			got <- r
		}()
		select {
		case r := <-got:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no output")
		}
		return Result{}
	}
	r := next()
	if r.Event != "updated" || r.Time == "" || !strings.Contains(string(r.Resource.Resource), "one") {
		t.Fatalf("first: %+v", r)
	}
	apply(cl + "name: w\nalt_stat_name: two\n")
	if r := next(); r.Event != "updated" || !strings.Contains(string(r.Resource.Resource), "two") {
		t.Fatalf("second: %+v", r)
	}
	if code, _, _ := runCmd(t, "delete", "--admin", adm, "cds", "w"); code != 0 {
		t.Fatal("delete failed")
	}
	if r := next(); r.Event != "removed" || r.Status != "does-not-exist" {
		t.Fatalf("third: %+v", r)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// examples/vhds, as its README shows it: on-demand virtual hosts resolved
// by domain, and a host nothing matches reported as not existing.
func TestGetVHDS(t *testing.T) {
	xds, _ := startServe(t, "--watch", "../../examples/vhds")
	code, out, errOut := runCmd(t, "get", "--server", xds, "--delta", "--timeout", "500ms", "-o", "json", "vhds",
		"shop/www.shop.example", "shop/eu.shop.example", "shop/api.internal", "shop/nowhere.org")
	if code != 1 {
		t.Fatalf("exit %d (want 1: one host does not exist): %s", code, errOut)
	}
	var rs []Result
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != 4 {
		t.Fatalf("%v\n%s", err, out)
	}
	for i, want := range []string{"shop/www", "shop/regional", "shop/api", ""} {
		var got struct{ Name string }
		if len(rs[i].Resource.Resource) > 0 {
			if err := json.Unmarshal(rs[i].Resource.Resource, &got); err != nil {
				t.Fatal(err)
			}
		}
		if got.Name != want {
			t.Errorf("%s: virtual host %q, want %q", rs[i].Name, got.Name, want)
		}
	}
	if rs[3].Status != "does-not-exist" {
		t.Errorf("%s: status %q", rs[3].Name, rs[3].Status)
	}
}
