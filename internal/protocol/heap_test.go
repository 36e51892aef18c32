package protocol_test

import "runtime"

// heapInUse is the heap's live bytes after two collections: what the
// memory tests compare before and after.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
