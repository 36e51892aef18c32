//go:build unix

package etcdtest

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path, waiting for it, so that test
// binaries started together build etcd once. The kernel drops the lock
// when the holder exits, even killed: no stale lock to clean up.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
