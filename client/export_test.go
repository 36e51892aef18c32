package client

import "github.com/xdsd/xdsd/internal/db"

// CacheOf is a client's cache, for tests that look into it.
func CacheOf(c *Client) *db.DB { return c.db }

// Settle waits until the client has done what was handed to it so far:
// the state goroutine's work, the handler goroutine's (deliveries, the
// ends of cancelled watches), and what those handed on.
func Settle(c *Client) {
	for range 2 {
		c.state.Do(func() {})
		c.handlers.Do(func() {})
	}
}
