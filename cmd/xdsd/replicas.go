package main

import (
	"context"
	"net"
	"os"
	"sync/atomic"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/etcd"
)

// replicaSet is how a replica on an etcd store finds the others for the
// fleet view (docs/fleet.md): it registers its admin API's URL under a
// lease, named by its advertised admin address, and lists the others'.
type replicaSet struct {
	st   *etcd.Store
	self atomic.Pointer[string]
}

// replicasOf returns the replica set of a store shared by replicas, or nil
// (a lone server: bolt, mem).
func replicasOf(st store.Store) *replicaSet {
	if e, ok := st.(*etcd.Store); ok {
		return &replicaSet{st: e}
	}
	return nil
}

// register lists this replica, whose admin API listens on adminAddr, and
// returns its name: the admin address, with the host's name in place of
// an unspecified address (0.0.0.0, [::]) so that the others can reach it.
func (r *replicaSet) register(ctx context.Context, adminAddr string, https bool) (string, error) {
	host, port, err := net.SplitHostPort(adminAddr)
	if err != nil {
		return "", err
	}
	name := net.JoinHostPort(advertisedHost(host), port)
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	if err := r.st.Register(ctx, name, scheme+name); err != nil {
		return "", err
	}
	r.self.Store(&name)
	return name, nil
}

// advertisedHost is the host name the other replicas reach an admin API
// listening on host by: the machine's name in place of an unspecified
// address (0.0.0.0, [::]), else host.
func advertisedHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			return h
		}
	}
	return host
}

// others lists the other live replicas' admin URLs by name (none for a
// lone server).
func (r *replicaSet) others(ctx context.Context) (map[string]string, error) {
	if r == nil {
		return nil, nil
	}
	all, err := r.st.Replicas(ctx)
	if err != nil {
		return nil, err
	}
	if self := r.self.Load(); self != nil {
		delete(all, *self)
	}
	return all, nil
}
