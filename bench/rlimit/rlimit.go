// Package rlimit raises the bench processes' open-file limit: the load
// generator holds a connection per 100 streams and the server one per
// connection, so 100,000 streams need more descriptors than a default soft
// limit of 1024 allows.
package rlimit

import "syscall"

// RaiseNoFile raises RLIMIT_NOFILE's soft limit to its hard limit.
func RaiseNoFile() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= l.Max {
		return nil
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}
