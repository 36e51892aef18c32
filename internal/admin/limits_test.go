package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/store/mem"
)

// Past the bound on concurrent writes an apply is answered 429 with
// Retry-After at once, while the write in progress goes on; once it is
// done, writes are admitted again.
func TestWritesBeyondTheLimitAre429(t *testing.T) {
	st := mem.New()
	defer st.Close()
	srv := httptest.NewServer(admin.Handler(admin.Options{Store: st, Limits: admin.Limits{Concurrent: 1}}))
	defer srv.Close()

	// A write in progress: its body is still arriving.
	pr, pw := io.Pipe()
	held := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(srv.URL+"/v1/apply", "application/yaml", pr)
		if err != nil {
			t.Error(err)
			close(held)
			return
		}
		held <- resp
	}()
	pw.Write([]byte("\"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n"))

	// The handler has the slot once the first bytes were read; poll the
	// second write until it is refused (it is admitted, and succeeds,
	// only if it got in before the first — retried then).
	var resp *http.Response
	for {
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
