// Command benchserver runs one xDS server implementation under test, with
// the control API of package control (setup, change, gc, stats) on a second
// address. Each implementation runs alone in its own process, so the CPU
// and memory the driver reads are that implementation's.
//
//	benchserver --impl xdsd|gcp-snapshot|gcp-linear|raw|relay
//	            [--xds-addr 127.0.0.1:0] [--control-addr 127.0.0.1:0]
//	            [--upstream ADDR]   (relay only: an xdsd benchserver)
//	            [--store etcd://HOST:PORT/PREFIX|bolt:PATH] (xdsd only: a replica
//	                                on etcd, or a bolt file as `xdsd serve` uses)
//	            [--tls-cert FILE --tls-key FILE [--client-ca FILE]]
//	                                (serve xDS over TLS; with --client-ca, mTLS)
//
// On start it prints one JSON line, {"xds":ADDR,"control":ADDR,"pid":N},
// and serves until SIGTERM or SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/xdsd/xdsd/bench/rlimit"
)

func main() {
	if err := rlimit.RaiseNoFile(); err != nil {
		fmt.Fprintln(os.Stderr, "benchserver: raising the open-file limit:", err)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchserver", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.impl, "impl", "", "xdsd, gcp-snapshot, gcp-linear, raw or relay")
	fs.StringVar(&o.xdsAddr, "xds-addr", "127.0.0.1:0", "address of the xDS (ADS) gRPC server")
	controlAddr := fs.String("control-addr", "127.0.0.1:0", "address of the control HTTP API")
	fs.StringVar(&o.upstream, "upstream", "", "relay only: the upstream xDS server (an xdsd benchserver)")
	fs.StringVar(&o.store, "store", "", "xdsd only: etcd://HOST:PORT[,...]/PREFIX, a replica sharing its state through etcd, or bolt:PATH, a bolt file")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve xDS over TLS with this certificate (PEM)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fs.StringVar(&o.clientCA, "client-ca", "", "with --tls-cert: require client certificates signed by these CAs (PEM), as xdsd serve --client-ca does")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (stderr)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	o.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	inst, err := start(o)
	if err != nil {
		return err
	}
	defer inst.stop()
	lis, err := net.Listen("tcp", *controlAddr)
	if err != nil {
		return fmt.Errorf("control listener: %w", err)
	}
	hs := &http.Server{Handler: inst.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(lis) }()

	line, _ := json.Marshal(struct {
		XDS     string `json:"xds"`
		Control string `json:"control"`
		PID     int    `json:"pid"`
	}{inst.xdsAddr, lis.Addr().String(), os.Getpid()})
	if _, err := fmt.Fprintf(os.Stdout, "%s\n", line); err != nil {
		return err
	}

	select {
	case <-ctx.Done():
		err = nil
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
