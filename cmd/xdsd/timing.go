package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"time"
)

// initialised is when this process finished initialising its packages
// (package main's variables are initialised after every package it
// imports): xdsd apply --timing counts from it. What comes before it,
// the exec and the packages' initialisation, is the command's wall time
// less its total (GODEBUG=inittrace=1 xdsd version breaks it down).
var initialised = time.Now()

// applyTiming is where an apply's time went, for xdsd apply --timing:
// this process's steps, timed by an httptrace, and the server's phases
// from its Server-Timing answer (internal/admin).
type applyTiming struct {
	start, conn, wrote, first, end time.Time
	server                         string // the Server-Timing header
}

// trace returns req, timing its connection, its writing and its answer.
func (t *applyTiming) trace(req *http.Request) *http.Request {
	t.start = time.Now()
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { t.conn = time.Now() },
		WroteRequest:         func(httptrace.WroteRequestInfo) { t.wrote = time.Now() },
		GotFirstResponseByte: func() { t.first = time.Now() },
	}))
}

// done notes that the answer was read, and its headers.
func (t *applyTiming) done(h http.Header) {
	t.end = time.Now()
	t.server = h.Get("Server-Timing")
}

// print writes one line: "timing (ms): prepare=0.4 connect=0.2 send=0.1
// wait=45.1 (server: staged=0.0 … served=33.5 total=44.9) answer=0.2
// total=46.0", each step from the end of the one before; prepare is from
// the end of initialisation to the request's start (flags, files).
func (t *applyTiming) print(w io.Writer) {
	var sb strings.Builder
	step := func(name string, from, to time.Time) {
		if from.IsZero() || to.IsZero() {
			fmt.Fprintf(&sb, " %s=?", name)
			return
		}
		fmt.Fprintf(&sb, " %s=%.1f", name, ms(to.Sub(from)))
	}
	step("prepare", initialised, t.start)
	step("connect", t.start, t.conn)
	step("send", t.conn, t.wrote)
	step("wait", t.wrote, t.first)
	if phases := serverTiming(t.server); phases != "" {
		fmt.Fprintf(&sb, " (server:%s)", phases)
	}
	step("answer", t.first, t.end)
	step("total", initialised, time.Now())
	fmt.Fprintf(w, "timing (ms):%s\n", sb.String())
}

// serverTiming turns a Server-Timing header ("decode;dur=1.204,
// commit;dur=9.870") into " decode=1.2 commit=9.9".
func serverTiming(h string) string {
	var sb strings.Builder
	for _, m := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(m), ";")
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok && name != "" {
				if d, err := strconv.ParseFloat(v, 64); err == nil {
					fmt.Fprintf(&sb, " %s=%.1f", name, d)
				}
			}
		}
	}
	return sb.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
