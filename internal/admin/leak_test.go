package admin_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/xdsd/xdsd/internal/testutil/etcdtest"
)

// TestMain builds etcd (for the replica race test) before the -timeout
// clock starts, then checks for leaked goroutines.
func TestMain(m *testing.M) {
	etcdtest.Prebuild()
	goleak.VerifyTestMain(m)
}
