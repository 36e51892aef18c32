package client

import "github.com/xdsd/xdsd/internal/db"

// CacheOf is a client's cache, for tests that look into it.
func CacheOf(c *Client) *db.DB { return c.db }
