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

	// A write in progress: its body is still arriving. The handler has the
	// slot once it reads the first bytes; until then a second write may
	// get in before it (admitted, and it succeeds), and the first may
	// then be refused itself: then the first is started again.
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
	first := <-held
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
