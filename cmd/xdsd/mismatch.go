package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// speaks is what a probe found listening at an address.
type speaks int

const (
	speaksUnknown speaks = iota // nothing answered, or nothing recognisable
	speaksTLS                   // a TLS server (HTTPS admin, or xDS with --tls-cert)
	speaksHTTP1                 // a plaintext HTTP/1 server (the admin API)
	speaksHTTP2                 // plaintext HTTP/2 frames (a gRPC, so xDS, port)
)

// probeTimeout bounds a probe: it runs only once a request has failed,
// to say why, and must not hold the error back for long.
const probeTimeout = 2 * time.Second

// probe says what speaks at addr, from what it answers a TLS ClientHello:
// a completed handshake or a TLS alert is a TLS server; a record that is
// not TLS carries the first bytes of the server's own protocol
// (tls.RecordHeaderError), which tell HTTP/1 from HTTP/2. It reads the
// answer's structure, not any error's text.
func probe(addr string) speaks {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}} //nolint:gosec // only to see what answers; nothing is sent
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		conn.Close()
		return speaksTLS
	}
	var alert tls.AlertError
	if errors.As(err, &alert) {
		return speaksTLS // e.g. it wants a client certificate
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		switch {
		case bytes.HasPrefix(rh.RecordHeader[:], []byte("HTTP/")):
			return speaksHTTP1
		case rh.RecordHeader[3] == 0x04 || rh.RecordHeader[0] == 0: // an HTTP/2 SETTINGS frame: 3 length bytes, type 4
			return speaksHTTP2
		}
	}
	return speaksUnknown
}

// xdsMismatch says, after an xDS connection to addr failed, what likely
// went wrong when the port speaks something else than plaintext gRPC:
// "" when the probe finds nothing to say.
func xdsMismatch(addr string) string {
	switch probe(addr) {
	case speaksTLS:
		return fmt.Sprintf("%s serves TLS (a server started with --tls-cert), and this client spoke plaintext (--server, or insecure channel_creds): "+
			"give --bootstrap FILE with a server whose channel_creds are {\"type\": \"tls\", \"config\": {\"ca_certificate_file\": ...}}", addr)
	case speaksHTTP1:
		return fmt.Sprintf("%s answers HTTP/1, as the admin API does: the xDS port is the server's --xds-addr (default 127.0.0.1:18000)", addr)
	}
	return ""
}

// adminMismatch says, after an admin request to addr failed, what likely
// went wrong when the port speaks something else than what the request
// expected: https is whether the request used https://.
func adminMismatch(addr string, https bool) string {
	switch p := probe(addr); {
	case p == speaksTLS && !https:
		return fmt.Sprintf("%s serves HTTPS (a server started with --tls-cert): give --admin https://%s (and --ca-file if its certificate is not in the system's pool)", addr, addr)
	case p == speaksHTTP1 && https:
		return fmt.Sprintf("%s serves plain HTTP: give --admin http://%s, or just %s", addr, addr, addr)
	case p == speaksHTTP2:
		return fmt.Sprintf("%s speaks HTTP/2 without TLS, as the xDS (gRPC) port does: the admin API is on the server's --admin-addr (default 127.0.0.1:18001)", addr)
	}
	return ""
}

// bindHint names the flag that sets an address that could not be bound.
func bindHint(err error, flagName string) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "listen" {
		return fmt.Errorf("%w (set by %s: another process holds it, or it is not an address of this machine; choose another with %s HOST:PORT)", err, flagName, flagName)
	}
	return err
}
