// Command holdports listens on the addresses it is given and holds them
// until it is killed: .ci/run holds the README's ports (127.0.0.1:18000
// and :18001) while the tests run, to prove that they take free ports.
// An address something else already holds is left to it.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: holdports HOST:PORT...")
		os.Exit(2)
	}
	for _, a := range os.Args[1:] {
		l, err := net.Listen("tcp", a)
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Printf("holdports: %s is already held by another process\n", a)
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdports:", err)
			os.Exit(1)
		}
		// Accepted connections are closed at once: a test that dials the
		// README's port by mistake fails fast instead of hanging.
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		fmt.Printf("holdports: holding %s\n", a)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}
