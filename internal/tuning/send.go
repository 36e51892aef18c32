package tuning

import "runtime"

// SendWorkers is how many goroutines a protocol server keeps computing
// and sending responses while streams wait for theirs, not counting those
// waiting on a slow client's flow control (see the package doc, "Sending
// on a few goroutines").
func SendWorkers() int { return runtime.GOMAXPROCS(0) }
