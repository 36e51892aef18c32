package etcdtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"time"
)

// The etcd server is built from its Go module, pinned by the module in
// etcdserver/ (go.mod and go.sum only: a `tool` directive naming
// go.etcd.io/etcd/server/v3). It is a module of its own because the etcd
// server's dependencies (grpc among them) are older than xdsd's: in xdsd's
// go.mod they would move xdsd's, or xdsd's would move etcd's. A test then
// needs Go and nothing else, not a system package; the same binary serves
// the tests that kill members and the benchmark's scenario r.

// buildMu and built make one build per process; the lock file makes one
// per machine when several test binaries (go test ./... runs packages in
// parallel) want it at once.
var (
	buildMu  sync.Mutex
	built    string
	buildErr error
)

// BuildBinary returns the path of the etcd server binary: $ETCD when set,
// else one built from the etcd server module pinned in etcdserver/go.mod
// and cached under the user's cache directory (os.UserCacheDir, e.g.
// ~/.cache/xdsd/etcd-v3.7.3-<hash>/etcd), so that only the first call on a
// machine builds it (a minute or more: the module is downloaded through
// the Go module proxy and compiled). logf, when not nil, is told when a
// build starts and ends. A failed build is not cached: the next process
// tries again.
func BuildBinary(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	if p := os.Getenv("ETCD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$ETCD=%s: %w (unset ETCD to build etcd from its Go module instead)", p, err)
		}
		return p, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if built != "" || buildErr != nil {
		return built, buildErr
	}
	built, buildErr = build(ctx, logf)
	if buildErr != nil {
		// Remembered for this process only: every test asking for etcd
		// fails with the same message instead of building again.
		return "", buildErr
	}
	return built, nil
}

// moduleDir is the directory of the etcd server module: beside this file
// in the source tree. Tests and `go run` of the benchmark compile from the
// source tree, so the file's compile-time path is where it is.
func moduleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the etcdtest package's source")
	}
	dir := filepath.Join(filepath.Dir(file), "etcdserver")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("the etcd server module is not at %s (built with -trimpath, or moved?): %w; set $ETCD to an etcd binary", dir, err)
	}
	return dir, nil
}

var etcdVersionRE = regexp.MustCompile(`(?m)^\s*(?:require\s+)?go\.etcd\.io/etcd/server/v3 (v\S+)`)

// cachePath is where the binary for the module in dir is kept: named by
// the etcd version and a hash of go.mod and go.sum, so that changing the
// pinned version (or any dependency) builds a new binary beside the old.
func cachePath(dir string) (string, error) {
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return "", err
	}
	m := etcdVersionRE.FindSubmatch(mod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod does not require go.etcd.io/etcd/server/v3", dir)
	}
	h := sha256.New()
	h.Write(mod)
	h.Write([]byte{0})
	h.Write(sum)
	h.Write([]byte(runtime.GOOS + "/" + runtime.GOARCH))
	cache, err := os.UserCacheDir()
	if err != nil {
		// No home directory (some CI sandboxes): the temporary directory
		// still keeps it across the test binaries of one run.
		cache = os.TempDir()
	}
	name := fmt.Sprintf("etcd-%s-%s", m[1], hex.EncodeToString(h.Sum(nil))[:12])
	return filepath.Join(cache, "xdsd", name, "etcd"), nil
}

func build(ctx context.Context, logf func(string, ...any)) (string, error) {
	dir, err := moduleDir()
	if err != nil {
		return "", err
	}
	bin, err := cachePath(dir)
	if err != nil {
		return "", err
	}
	if isFile(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("etcd binary cache: %w", err)
	}
	// One builder at a time; the others wait for it, then find the binary.
	unlock, err := lockFile(filepath.Join(filepath.Dir(bin), "lock"))
	if err != nil {
		return "", fmt.Errorf("etcd binary cache: %w", err)
	}
	defer unlock()
	if isFile(bin) {
		return bin, nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building etcd needs the go command on $PATH (or set $ETCD to an etcd binary): %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	defer os.Remove(tmp)
	if logf != nil {
		logf("building etcd from its Go module (%s) into %s: once per machine", dir, bin)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", tmp, "go.etcd.io/etcd/server/v3")
	cmd.Dir = dir
	// The module's own go.mod and go.sum decide the build, whatever the
	// caller's workspace, flags (-race, -mod) or cgo setting.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building etcd (go build go.etcd.io/etcd/server/v3 in %s): %v\n%s\n(it needs the Go module proxy or a module cache holding the etcd server; or set $ETCD to an etcd binary)", dir, err, out.Bytes())
	}
	// A rename is atomic: a reader sees no binary or a whole one.
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("etcd binary cache: %w", err)
	}
	if logf != nil {
		logf("built etcd in %s", time.Since(start).Round(time.Second))
	}
	return bin, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
