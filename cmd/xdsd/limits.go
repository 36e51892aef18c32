package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// limitListener caps the connections open through a listener: one over
// the cap is accepted and closed at once — the client sees a closed
// connection and backs off (or tries another server) — rather than left
// waiting in the kernel's backlog while it holds a file descriptor the
// connections being served need.
//
// The admin port also caps the connections of one source (an IPv4
// address, an IPv6 /64), so that one host cannot take every slot, and
// keeps a small reserve past the cap for health checks: a connection
// taken from the reserve is answered /healthz and /readyz only, once
// (probeOnly).
type limitListener struct {
	net.Listener
	max       int
	perSource int // 0: no per-source cap
	reserve   int // probe-only connections past max
	log       *slog.Logger
	logLimit  *rate.Limiter

	mu       sync.Mutex
	open     int
	reserved int
	bySource map[netip.Prefix]int

	gauge   prometheus.Gauge
	refused prometheus.Counter
}

func newLimitListener(l net.Listener, max int, port string, reg prometheus.Registerer) *limitListener {
	ll := &limitListener{Listener: l, max: max, bySource: map[netip.Prefix]int{},
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xdsd_connections", ConstLabels: prometheus.Labels{"port": port},
			Help: "Connections open on a port."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "xdsd_connections_refused_total", ConstLabels: prometheus.Labels{"port": port},
			Help: "Connections closed at once because the port's connection cap, or its cap per source, was reached."}),
	}
	if reg != nil {
		reg.MustRegister(ll.gauge, ll.refused)
	}
	return ll
}

// sourceOf is the per-source key of a remote address: the address, or its
// /64 for IPv6 (one host commonly holds a whole /64).
func sourceOf(a net.Addr) netip.Prefix {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}
	}
	ip := ap.Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		probe, why := false, ""
		l.mu.Lock()
		switch {
		case l.perSource > 0 && l.bySource[src] >= l.perSource:
			why = "its source holds the most connections one source may"
		case l.open < l.max:
			l.open++
		case l.reserved < l.reserve:
			l.reserved++
			probe = true
		default:
			why = "the port is at its connection cap"
		}
		if why == "" {
			l.bySource[src]++
		}
		l.mu.Unlock()
		if why != "" {
			l.refused.Inc()
			if l.log != nil && l.logLimit.Allow() {
				l.log.Warn("connection refused: "+why, "remote", c.RemoteAddr().String(), "max", l.max, "per_source", l.perSource)
			}
			c.Close()
			continue
		}
		l.gauge.Inc()
		return &limitedConn{Conn: c, l: l, src: src, probeOnly: probe}, nil
	}
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	l         *limitListener
	src       netip.Prefix
	probeOnly bool // taken from the reserve: health checks only
	once      sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.probeOnly {
			c.l.reserved--
		} else {
			c.l.open--
		}
		if c.l.bySource[c.src]--; c.l.bySource[c.src] <= 0 {
			delete(c.l.bySource, c.src)
		}
		c.l.mu.Unlock()
		c.l.gauge.Dec()
	})
	return err
}

type probeOnlyKey struct{}

// markProbeOnly is the admin server's ConnContext: it marks the requests
// of a connection taken from the reserve.
func markProbeOnly(ctx context.Context, c net.Conn) context.Context {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = nc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok && lc.probeOnly {
		return context.WithValue(ctx, probeOnlyKey{}, true)
	}
	return ctx
}

// probesOnReserve answers a connection taken from the reserve with the
// health checks only, and closes it after one answer: under a flood of
// connections the probes still answer, and the reserve is not held.
func probesOnReserve(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(probeOnlyKey{}) == nil {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the admin port is at --admin-max-connections: its reserve answers only /healthz and /readyz; try again", http.StatusServiceUnavailable)
	})
}
