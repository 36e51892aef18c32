package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/testutil"
)

// Past the bound on concurrent writes an apply is answered 429 with
// Retry-After at once, while the write in progress goes on; once it is
// done, writes are admitted again.
func TestWritesBeyondTheLimitAre429(t *testing.T) {
	st := mem.New()
	defer st.Close()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Limits: admin.Limits{Concurrent: 1}}))
	defer srv.Close()

	// A write in progress: its body is still arriving. It has the slot
	// once its handler runs; until then a second write may get in before
	// it (admitted, and it succeeds), and the first may then be refused
	// itself: answered 429 at once, its body unread (see
	// TestRefusedWriteAnsweredBeforeItsBodyEnds), it is started again.
	const firstDoc = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"
	var (
		pw   *io.PipeWriter
		held chan *http.Response
	)
	start := func() {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		held = make(chan *http.Response, 1)
		go func(held chan *http.Response) {
			resp, err := http.Post(srv.URL+"/v1/apply", "application/yaml", pr)
			if err != nil {
				t.Error(err)
				close(held)
				return
			}
			held <- resp
		}(held)
		pw.Write([]byte(firstDoc))
	}
	start()
	// Deferred after srv.Close, so run before it: if the test fails while
	// a write's body is open, Close does not wait for its handler.
	defer func() { pw.Close() }()
	// Poll the second write until it is refused, with a deadline: each
	// round is a write, not a wait for time to pass.
	deadline := time.Now().Add(testutil.Wait)
	var resp *http.Response
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no write was refused within %v while another was in progress", testutil.Wait)
		}
		select {
		case r := <-held:
			// The first write was answered before its body was whole:
			// refused, a second having had the slot. Start it again.
			if r != nil {
				r.Body.Close()
			}
			pw.Close()
			start()
		default:
		}
		var err error
		resp, err = http.Post(srv.URL+"/v1/apply", "application/yaml",
			strings.NewReader("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: b\n"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			break
		}
		resp.Body.Close()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "too many writes in progress") {
		t.Errorf("429 without Retry-After or reason: %v %s", resp.Header, body)
	}
	pw.Write([]byte("name: a\n"))
	pw.Close()
	var first *http.Response
	select {
	case first = <-held:
	case <-time.After(testutil.Wait):
		t.Fatalf("the write in progress was not answered within %v of its body's end", testutil.Wait)
	}
	if first == nil || first.StatusCode != http.StatusOK {
		t.Fatalf("the write in progress: %v", first)
	}
	first.Body.Close()
	resp, err := http.Post(srv.URL+"/v1/apply", "application/yaml",
		strings.NewReader("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\nname: c\n"))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the write finished: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A write refused 429 is answered at once, while its body is still being
// sent. Two writes whose bodies arrive from pipes, neither finished: one
// has the slot, the other is refused, and that answer must not wait for
// the rest of its body (net/http would read it before answering, to keep
// the connection, and a client waiting for the answer before it sends
// more would wait forever: the hang of the test above under load).
func TestRefusedWriteAnsweredBeforeItsBodyEnds(t *testing.T) {
	st := mem.New()
	defer st.Close()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Limits: admin.Limits{Concurrent: 1}}))
	defer srv.Close()
	const doc = "\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"
	type answer struct {
		i    int
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 2)
	var pws [2]*io.PipeWriter
	for i := range pws {
		pr, pw := io.Pipe()
		pws[i] = pw
		// Deferred after srv.Close, so run before it: a failure below
		// ends both bodies, and Close does not wait on their handlers.
		defer pw.Close()
		go func() {
			resp, err := http.Post(srv.URL+"/v1/apply", "application/yaml", pr)
			answers <- answer{i, resp, err}
		}()
		pw.Write([]byte(doc))
	}
	var refused answer
	select {
	case refused = <-answers:
	case <-time.After(testutil.Wait):
		t.Fatalf("neither of two writes in progress (limit 1) was answered within %v: the refused one waits for its body to end", testutil.Wait)
	}
	if refused.err != nil {
		t.Fatal(refused.err)
	}
	refused.resp.Body.Close()
	if refused.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("write %d answered %s while the other was in progress, want 429", refused.i, refused.resp.Status)
	}
	held := 1 - refused.i
	pws[held].Write([]byte("name: a\n"))
	pws[held].Close()
	var first answer
	select {
	case first = <-answers:
	case <-time.After(testutil.Wait):
		t.Fatalf("the write holding the slot was not answered within %v of its body's end", testutil.Wait)
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	first.resp.Body.Close()
	if first.i != held || first.resp.StatusCode != http.StatusOK {
		t.Errorf("write %d answered %s, want write %d 200", first.i, first.resp.Status, held)
	}
}
