package etcdtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	Prebuild()
	goleak.VerifyTestMain(m)
}

// With no $ETCD, the binary is built from the pinned module, cached under
// the user's cache directory, and is the pinned version; a cluster of it
// serves reads and writes.
func TestBuiltBinary(t *testing.T) {
	t.Setenv("ETCD", "")
	bin := Binary(t)
	dir, err := moduleDir()
	if err != nil {
		t.Fatal(err)
	}
	want, err := cachePath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bin != want {
		t.Fatalf("binary at %s, want the cached %s", bin, want)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(string(etcdVersionRE.FindSubmatch(mod)[1]), "v")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	if !regexp.MustCompile(`(?m)^etcd Version: ` + regexp.QuoteMeta(version) + `$`).Match(out) {
		t.Fatalf("%s --version says\n%s\nwant etcd Version: %s", bin, out, version)
	}
	// A second ask is the same binary, not a new build.
	if again, err := BuildBinary(context.Background(), func(string, ...any) { t.Error("built again") }); err != nil || again != bin {
		t.Fatalf("second BuildBinary: %q, %v; want %q", again, err, bin)
	}

	c := Start(t, 1)
	cl := c.Client(t)
	if _, err := cl.Put(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if r, err := cl.Get(context.Background(), "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get k: %v, %v", r, err)
	}
}

// $ETCD names the binary to use instead; one that does not exist is an
// error naming it, not a silent build.
func TestETCDVariable(t *testing.T) {
	t.Setenv("ETCD", filepath.Join(t.TempDir(), "no-etcd"))
	_, err := BuildBinary(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "no-etcd") || !strings.Contains(err.Error(), "unset ETCD") {
		t.Fatalf("BuildBinary with a missing $ETCD: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ETCD", self)
	if p, err := BuildBinary(context.Background(), nil); err != nil || p != self {
		t.Fatalf("BuildBinary with $ETCD=%s: %q, %v", self, p, err)
	}
}

// The cache name follows the pinned module: another go.sum is another
// binary, so a version bump never runs a stale etcd.
func TestCachePathFollowsModule(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module m\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v3.9.9 // indirect\n")
	write("go.sum", "a\n")
	a, err := cachePath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a, "etcd-v3.9.9-") {
		t.Fatalf("cache path %s does not name the version v3.9.9", a)
	}
	write("go.sum", "b\n")
	if b, err := cachePath(dir); err != nil || b == a {
		t.Fatalf("another go.sum: %s, %v; want a path other than %s", b, err, a)
	}
	write("go.mod", "module m\n")
	if _, err := cachePath(dir); err == nil {
		t.Fatal("a go.mod without the etcd server: no error")
	}
}
