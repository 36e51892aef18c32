//go:build !linux

package main

// hardNoFileLimit is not read here (Linux only): no cap is applied.
func hardNoFileLimit() uint64 { return 0 }
