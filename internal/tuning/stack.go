package tuning

// OnOwnStack runs f on a goroutine of its own and waits for it: what f
// needs of a stack is freed when it returns, rather than growing the
// caller's for good (see the package doc, "A log line on a stack of its
// own"). Use it only for deep work on a goroutine that then waits long
// with a shallow stack.
func OnOwnStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}
