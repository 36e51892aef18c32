package client

import "github.com/xdsd/xdsd/internal/db"

// CacheOf is a client's cache, for tests that look into it.
func CacheOf(c *Client) *db.DB { return c.c.DB() }

// Settle waits until the client has done what was handed to it so far
// (clientcore.Client.Settle).
func Settle(c *Client) { c.c.Settle() }
