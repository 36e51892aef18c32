package protocol

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// initLimiter makes a stream's limiter start full, as rate.NewLimiter's
// does: the whole burst is allowed at once, and no more until it refills
// at the rate.
func TestInitLimiterStartsFull(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int
	}{{100, 1000}, {1, 1}, {0.001, 5}, {1e-12, 3}} {
		var l rate.Limiter
		initLimiter(&l, c.rate, c.burst)
		now := time.Now()
		if got := l.TokensAt(now); got != float64(c.burst) {
			t.Errorf("rate %g burst %d: %g tokens at the start, want %d", c.rate, c.burst, got, c.burst)
		}
		if !l.AllowN(now, c.burst) {
			t.Errorf("rate %g burst %d: the first burst is not allowed", c.rate, c.burst)
		}
		if l.AllowN(now, 1) {
			t.Errorf("rate %g burst %d: a request over the burst is allowed at once", c.rate, c.burst)
		}
		if l.Limit() != rate.Limit(c.rate) || l.Burst() != c.burst {
			t.Errorf("rate %g burst %d: limiter is %g/%d", c.rate, c.burst, l.Limit(), l.Burst())
		}
	}
}
