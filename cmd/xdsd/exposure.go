package main

import (
	"log/slog"
)

// fdReserve is the file descriptors kept for everything but connections:
// the store, logs, upstream and etcd connections, the watched directory.
const fdReserve = 64

// hardNoFile is the process's hard RLIMIT_NOFILE (0: unknown or
// unlimited). Go raises the soft limit to it at start.
var hardNoFile = hardNoFileLimit

// warnExposure logs what the flags leave exposed, and caps the ports'
// connections to what the open-file limit allows. Call it before listen.
func (f *daemonFlags) warnExposure(log *slog.Logger, relay bool) {
	if f.tls == nil && !loopback(f.xdsAddr) {
		log.Warn("the xDS port is plaintext on a non-loopback address: anyone on the network can read what it serves and pose as any client; give --tls-cert and --tls-key (and --client-ca)",
			"xds", f.xdsAddr)
	}
	if relay && f.guard == nil {
		who := "any downstream client that reaches --xds-addr"
		if f.clientCA != "" {
			who = "any downstream client with a certificate --client-ca signs"
		}
		log.Warn("the relay serves every Secret it relays (private keys) to "+who+"; give --policy to say which identities get which", "xds", f.xdsAddr)
	}
	f.capToNoFile(hardNoFile(), log)
}

// capToNoFile lowers --max-connections (and, if need be,
// --admin-max-connections) so that both ports fit in hard file
// descriptors with fdReserve to spare: past the limit accept fails, on
// both ports at once, and health checks with it.
func (f *daemonFlags) capToNoFile(hard uint64, log *slog.Logger) {
	if hard == 0 {
		return
	}
	*f = f.withDefaults()
	budget := int64(hard) - fdReserve
	admin := int64(0)
	if f.adminAddr != "" {
		admin = int64(f.adminMaxConns) + adminProbeReserve
	}
	if int64(f.maxConns)+admin <= budget {
		return
	}
	wasXDS, wasAdmin := f.maxConns, f.adminMaxConns
	if f.adminAddr != "" && admin > budget/4 {
		// The admin port keeps at most a quarter.
		f.adminMaxConns = max(1, int(budget/4)-adminProbeReserve)
		admin = int64(f.adminMaxConns) + adminProbeReserve
	}
	f.maxConns = max(1, int(budget-admin))
	log.Warn("the open-file limit is too low for the connection caps: capped so that both ports keep accepting; raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) to serve more",
		"rlimit_nofile", hard, "max_connections", f.maxConns, "was", wasXDS, "admin_max_connections", f.adminMaxConns, "admin_was", wasAdmin)
}
