package main

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A listener at its connection cap closes a new connection at once; a
// slot freed by a closed connection is taken by the next one.
func TestConnectionCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 1, "xds", prometheus.NewRegistry())
	defer l.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	over := dial()
	// The connection over the cap is closed by the server: the client
	// reads EOF (or a reset), not a hang.
	over.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = over.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection over the cap was not closed: %v", err)
	} else if err != io.EOF {
		t.Logf("over the cap: %v", err)
	}
	if n := testutil.ToFloat64(l.refused); n != 1 {
		t.Errorf("refused counter %v, want 1", n)
	}
	first.Close()
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("the freed slot was not given to the next connection")
	}
	if n := testutil.ToFloat64(l.gauge); n != 0 {
		t.Errorf("open connections gauge %v after all closed, want 0", n)
	}
}
