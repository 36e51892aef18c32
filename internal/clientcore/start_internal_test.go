package clientcore

import (
	"testing"

	"github.com/xdsd/xdsd/client/clientdata"
	"github.com/xdsd/xdsd/internal/cachepolicy"
	"github.com/xdsd/xdsd/internal/testutil/testorigin"
)

// startClient starts a client of the bootstrap data with o (quiet unless
// o says otherwise), closed when the test ends.
func startClient(t *testing.T, data string, o clientdata.Options) *Client {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testorigin.Quiet
	}
	b, err := clientdata.ParseBootstrap([]byte(data))
	if err != nil {
		t.Fatalf("ParseBootstrap: %v\n%s", err, data)
	}
	c, err := New(b, o, cachepolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
