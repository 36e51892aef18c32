package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/client"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
	"github.com/xdsd/xdsd/resource"
)

// logRecorder is a slog handler keeping every record as "LEVEL msg k=v...".
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	wrote chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{wrote: make(chan struct{}, 1)} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		s += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return nil
}

// count counts the lines holding every one of parts.
func (l *logRecorder) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, s := range l.lines {
		for _, p := range parts {
			if !strings.Contains(s, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logRecorder) await(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.After(wait)
	for l.count(parts...) == 0 {
		select {
		case <-l.wrote:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("no log line with %q in:\n%s", parts, strings.Join(l.lines, "\n"))
		}
	}
}

// Connection failures reach Options.Logger — once while a server keeps
// failing the same way — and so do NACKs, with the reason; the upstream's
// state names the server and the error.
func TestLogsConnectionStateAndNACKs(t *testing.T) {
	f := startFailingServer(t)
	logs := newLogRecorder()
	c := newClient(t, bs{servers: []string{f.addr}}.build(t), client.Options{Logger: slog.New(logs), BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	cancel, err := c.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	f.awaitStreams(t, 5)
	if n := logs.count("WARN xDS server unusable", "server="+f.addr, "Unimplemented"); n != 1 {
		t.Errorf("%d log lines for a server failing the same way 5 times, want 1", n)
	}
	u, err := c.UpstreamFor("a")
	if err != nil || u.Connected != "" || !strings.Contains(u.LastError, "Unimplemented") || u.Servers[0] != f.addr {
		t.Errorf("upstream %+v, %v", u, err)
	}

	o := testorigin.Start(t)
	o.Apply(cluster("a", "bad"))
	reject := func(v *resource.Variant, m proto.Message) error { return errors.New("no thanks") }
	logs2 := newLogRecorder()
	c2 := newClient(t, bs{servers: []string{o.Addr}}.build(t), client.Options{Logger: slog.New(logs2), Validate: reject})
	cancel2, err := c2.Watch(t.Context(), resource.ClusterURL, "a", func(client.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()
	logs2.await(t, "INFO xDS stream up", "server="+o.Addr)
	logs2.await(t, "WARN xDS response rejected (NACK)", "server="+o.Addr, "type="+resource.ClusterURL, "reason=a: rejected: no thanks")
	o.Stop()
	logs2.await(t, "WARN xDS stream lost", "server="+o.Addr)
}
