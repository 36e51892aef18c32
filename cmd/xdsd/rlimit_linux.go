//go:build linux

package main

import "syscall"

// hardNoFileLimit is the hard RLIMIT_NOFILE; 0 when unlimited or unknown.
func hardNoFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Max == ^uint64(0) {
		return 0
	}
	return r.Max
}
