package main

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// limitListener caps the connections open through a listener: one over
// the cap is accepted and closed at once — the client sees a closed
// connection and backs off (or tries another server) — rather than left
// waiting in the kernel's backlog while it holds a file descriptor the
// connections being served need.
type limitListener struct {
	net.Listener
	max     int
	mu      sync.Mutex
	open    int
	gauge   prometheus.Gauge
	refused prometheus.Counter
}

func newLimitListener(l net.Listener, max int, port string, reg prometheus.Registerer) *limitListener {
	ll := &limitListener{Listener: l, max: max,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xdsd_connections", ConstLabels: prometheus.Labels{"port": port},
			Help: "Connections open on a port."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "xdsd_connections_refused_total", ConstLabels: prometheus.Labels{"port": port},
			Help: "Connections closed at once because the port's connection cap was reached."}),
	}
	if reg != nil {
		reg.MustRegister(ll.gauge, ll.refused)
	}
	return ll
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.open >= l.max {
			l.mu.Unlock()
			l.refused.Inc()
			c.Close()
			continue
		}
		l.open++
		l.mu.Unlock()
		l.gauge.Inc()
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
		c.l.gauge.Dec()
	})
	return err
}
