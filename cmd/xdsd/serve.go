package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdsd/xdsd/internal/admin"
	"github.com/xdsd/xdsd/internal/fleet"
	"github.com/xdsd/xdsd/internal/origin"
	"github.com/xdsd/xdsd/internal/protocol"
	"github.com/xdsd/xdsd/internal/redact"
	"github.com/xdsd/xdsd/internal/rollout"
	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/internal/store/bolt"
	"github.com/xdsd/xdsd/internal/store/etcd"
	"github.com/xdsd/xdsd/internal/store/mem"
	"github.com/xdsd/xdsd/internal/tuning"
	"github.com/xdsd/xdsd/internal/tuning/initgc"
	"github.com/xdsd/xdsd/resource"
)

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

// openStore opens a --store value: bolt:PATH, mem: or
// etcd://HOST:PORT[,HOST:PORT...][/PREFIX], keeping history revisions of
// history.
//
// ef reaches a secured etcd; it is an error with another store.
func openStore(ctx context.Context, spec string, ef etcdFlags, history int, log *slog.Logger) (store.Store, error) {
	return openStoreFor(ctx, spec, ef, history, log, false)
}

// openStoreFor is openStore; with repair, an etcd store opens even when
// records are damaged, and its next apply replaces them (restore).
func openStoreFor(ctx context.Context, spec string, ef etcdFlags, history int, log *slog.Logger, repair bool) (store.Store, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	if kind != "etcd" && ef.set() {
		return nil, usagef("--etcd-cert, --etcd-key, --etcd-ca, --etcd-user and --etcd-password-file are for --store etcd://…, not %q", spec)
	}
	switch kind {
	case "bolt":
		if arg == "" {
			return nil, usagef("--store bolt: needs a path, e.g. bolt:./xdsd.db")
		}
		return bolt.Open(arg, bolt.Options{History: history, Preload: !repair}) // (a server loads what Open read)
	case "mem":
		return mem.NewWithHistory(history), nil
	case "etcd":
		o, err := etcd.ParseURL(spec)
		if err != nil {
			return nil, usagef("--store %v", err)
		}
		if err := ef.apply(&o); err != nil {
			return nil, err
		}
		o.Logger, o.History, o.Repair = log, history, repair
		return etcd.Open(ctx, o)
	}
	return nil, usagef("--store %q: want bolt:PATH, mem: or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", spec)
}

// exporter backs up a store that cannot copy itself (etcd) as a bolt
// file; a mem: store holds nothing worth backing up.
func exporter(st store.Store) func(ctx context.Context, w io.Writer) (int64, error) {
	if _, ok := st.(*mem.Store); ok {
		return nil
	}
	return func(ctx context.Context, w io.Writer) (int64, error) { return bolt.Export(ctx, st, w) }
}

type serveFlags struct {
	daemonFlags
	storeSpec, watchDir string
	etcd                etcdFlags
	peers               peerFlags
	watchInterval       time.Duration
	maxBatchBytes       int64
	history             int
	verifyInterval      time.Duration
}

func runServe(args []string, stdout, stderr io.Writer) error {
	initgc.Settle() // a long-running command: GOGC is its own from the start
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var f serveFlags
	f.register(fs, "127.0.0.1:18000", "127.0.0.1:18001")
	fs.StringVar(&f.storeSpec, "store", "bolt:./xdsd.db", "store: bolt:PATH (embedded, durable), mem: (nothing survives) or etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (shared by replicas)")
	f.etcd.register(fs)
	f.peers.register(fs)
	fs.StringVar(&f.watchDir, "watch", "", "apply this directory of resource files at start and on every change")
	fs.DurationVar(&f.watchInterval, "watch-interval", 500*time.Millisecond, "how often --watch looks for changes (a positive duration)")
	fs.IntVar(&f.history, "history", bolt.DefaultHistory, "how many revisions to keep for history, diff and rollback (older ones are compacted)")
	fs.DurationVar(&f.verifyInterval, "verify-interval", time.Hour, "how often to read the whole store and check it for damage (bolt, etcd); damage marks /readyz degraded (0: never)")
	fs.Int64Var(&f.maxBatchBytes, "max-batch-bytes", admin.DefaultMaxBatchBytes, "largest apply the admin API takes, in bytes (the server holds about half of it while storing it)")
	pos, err := parse(fs, args, "serve [flags]", stdout)
	if err != nil {
		return err
	}
	f.noteExplicit(fs)
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if f.watchInterval <= 0 {
		return usagef("--watch-interval %v: want a positive duration", f.watchInterval)
	}
	if f.history < 1 || f.history > 10_000_000 {
		return usagef("--history %d: want 1 to 10000000 revisions", f.history)
	}
	if f.maxBatchBytes <= 0 {
		return usagef("--max-batch-bytes %d: want a positive number of bytes", f.maxBatchBytes)
	}
	if f.verifyInterval < 0 {
		return usagef("--verify-interval %v: want a duration of 0 (never) or more", f.verifyInterval)
	}
	log, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, f, log, nil)
}

// serve runs the server until ctx ends. ready, if set, receives the bound
// addresses once both listeners are up and the store's state, the watched
// directory's included, is loaded (tests use it).
//
// The listeners are bound before --watch touches the store, so that a
// server that cannot start leaves the store as it found it.
func serve(ctx context.Context, f serveFlags, log *slog.Logger, ready func(xds, admin string)) error {
	if err := f.load(f.adminAddr, log); err != nil {
		return err
	}
	f.warnExposure(log, false)
	st, err := openStore(ctx, f.storeSpec, f.etcd, f.history, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// Redaction digests are keyed by the store's key, so that replicas
	// agree on them and restarts keep them (internal/redact).
	rk, err := store.KeyFor(ctx, st, store.RedactKeyName)
	if err != nil {
		return err
	}
	redact.SetKey(rk)

	reg := newRegistry()
	reps := replicasOf(st)
	srv := origin.New(st, origin.Options{Logger: log, Registerer: reg, Protocol: f.protocolOptions()})
	wh := newWatchHealth(f.watchDir, reg)
	vh := &verifyHealth{}
	checks := admin.NewCheckIndex() // built once serving, below
	ao, err := f.peers.options(f.adminAuth(f.adminAddr, admin.Options{Limits: f.applyLimits(), Registerer: reg,
		Store: st, Ready: srv.Ready, Served: srv.WaitRev, Gatherer: reg, Logger: log, Degraded: degraded(st, wh, vh), Owned: watchOwned(st, f.watchDir),
		MaxBatchBytes: f.maxBatchBytes,
		CheckIndex:    checks,
		Memory:        tuning.Process(), // GOGC follows the applies (internal/tuning)
		Clients:       func() any { return srv.Streams() },
		Groups:        func(context.Context) ([]fleet.Group, error) { return srv.Protocol().Groups(), nil },
		Page: func(_ context.Context, q protocol.ClientQuery) (protocol.ClientPage, error) {
			return srv.Protocol().Page(q), nil
		},
		Concerned: func(_ context.Context, ch protocol.Changed) ([]protocol.StreamStatus, error) {
			return srv.Protocol().Concerned(ch), nil
		},
		Export:    exporter(st),
		Replicas:  reps.others,
		StageHold: srv.StageHold,
		Rollout: func(rev int64, changes []store.Change) rollout.Report {
			return rollout.Status(srv.Protocol().Concerned(rollout.Names(changes)), rev, changes, func(typeURL, name string) []*resource.Variant {
				vs, _ := st.StateAt(context.Background(), st.Rev(), store.Filter{Type: typeURL, Name: name})
				return vs
			})
		},
	}), reps != nil)
	if err != nil {
		return err
	}
	if host, _, err := net.SplitHostPort(f.adminAddr); err == nil && reps != nil && advertisedHost(host) != host {
		// The others ask this replica by the machine's name (register):
		// an admin API without credentials answers only the Host names
		// it knows as its own.
		ao.Hosts = append(ao.Hosts, advertisedHost(host))
	}
	if reps != nil {
		// A baked revision is promoted only once every replica's canary
		// clients are known to hold no NACK (docs/rollouts.md).
		srv.SetFleetStage(func(ctx context.Context, rev int64) (rollout.Report, error) {
			return admin.FleetRollout(ctx, ao, rev)
		})
	}
	d, err := listen(f.daemonFlags, log, reg, srv.Register, admin.Handler(ao))
	if err != nil {
		return err
	}
	for _, n := range d.notes {
		log.Warn(n)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if reps != nil && d.adminAddr() != "" {
		// The fleet view asks the other replicas through their admin
		// APIs: each lists itself under a lease (docs/fleet.md).
		if name, err := reps.register(runCtx, d.adminAddr(), f.tls != nil); err != nil {
			log.Warn("registering as a replica failed: the fleet view of the others will miss this one's clients", "error", err)
		} else {
			srv.Protocol().SetReplica(name)
		}
	}
	verified := make(chan struct{})
	if c, ok := st.(store.Checker); ok && f.verifyInterval > 0 {
		go func() { defer close(verified); vh.run(runCtx, c, f.verifyInterval, log) }()
	} else {
		close(verified)
	}

	watched := make(chan struct{})
	if f.watchDir != "" {
		w := &origin.DirWatcher{Store: st, Dir: f.watchDir, Interval: f.watchInterval, Logger: log, Applied: wh.applied}
		var staged *origin.StagedError
		if _, err := w.Sync(ctx); errors.As(err, &staged) {
			// A revision staged (through another replica, or before a
			// restart) holds the directory back, not the server: it is
			// applied once the revision is promoted or aborted, and
			// until then /readyz and the page say why (watchHealth).
			log.Warn("watched directory not applied at start: a revision is staged", "dir", f.watchDir, "error", err)
		} else if err != nil {
			closeUnstarted(d)
			return fmt.Errorf("--watch %s: %w", f.watchDir, err)
		}
		log.Info("watching directory", "dir", f.watchDir, "revision", st.Rev())
		go func() { defer close(watched); w.Run(runCtx) }()
	} else {
		close(watched)
	}

	indexed := make(chan struct{})
	srv.Start()
	go func() {
		// Following the store fails (an error ends serve, rather than a
		// server waiting for ever, not ready), or ends with Close below.
		<-srv.Stopped()
		var err error
		if srv.Err() != nil {
			err = fmt.Errorf("store %s: %w", f.storeSpec, srv.Err())
		}
		d.errc <- err
	}()
	d.start()
	// Report readiness once the store's state is loaded (an interrupted
	// or failed load falls through to the shutdown below).
	if srv.WaitRev(ctx, st.Rev()) == nil {
		d.serving()
		log.Info("xdsd serving", "xds", d.xdsAddr(), "admin", d.adminAddr(), "store", f.storeSpec, "revision", st.Rev())
		if ready != nil {
			ready(d.xdsAddr(), d.adminAddr())
		}
		if d.adminAddr() != "" {
			// The applies' client checks need an index of every stored
			// variant: built now, in the background, rather than by the
			// first apply (100-130 s with a million stored), and after
			// readiness, which does not wait for it.
			go func() { defer close(indexed); checks.Build(runCtx, st, log) }()
		} else {
			close(indexed)
		}
	} else {
		close(indexed)
	}
	err = d.wait(ctx)
	log.Info("shutting down")
	cancel()
	<-indexed  // no build may run into the closed store
	<-watched  // no sync may run into the closed store
	<-verified // nor a check
	d.stop(srv.Close)
	return err
}

// degraded joins the watched directory's trouble with the store's: an
// etcd store that cannot reach etcd keeps serving what it holds, and
// /readyz says so.
func degraded(st store.Store, wh *watchHealth, vh *verifyHealth) func() string {
	return func() string {
		var why []string
		d := vh.degraded()
		if d != "" {
			why = append(why, d)
		}
		// An etcd replica's damaged record, read by the background check
		// (then the same text as vh's) or by a reload.
		if dm, ok := st.(interface{ Damaged() string }); ok {
			if r := dm.Damaged(); r != "" && r != d {
				why = append(why, r)
			}
		}
		if u, ok := st.(interface{ Unreachable() string }); ok {
			if r := u.Unreachable(); r != "" {
				why = append(why, r)
			}
		}
		if d := wh.degraded(); d != "" {
			why = append(why, d)
		}
		return strings.Join(why, "; ")
	}
}

// closeUnstarted releases the listeners of a daemon that never started.
func closeUnstarted(d *daemon) {
	d.lis.Close()
	if d.alis != nil {
		d.alis.Close()
	}
	d.g.Stop()
}

// watchHealth keeps the outcome of the last attempt to apply a watched
// directory: a failed edit keeps the last good state served, and shows in
// /readyz ("degraded"), on the admin page and in the metrics.
type watchHealth struct {
	dir      string
	failures prometheus.Counter
	failing  prometheus.Gauge

	mu      sync.Mutex
	lastErr error
}

func newWatchHealth(dir string, reg prometheus.Registerer) *watchHealth {
	w := &watchHealth{dir: dir,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "xdsd_watch_apply_failures_total",
			Help: "Changes of the --watch directory that could not be applied (the last good state stays served)."}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "xdsd_watch_failing",
			Help: "1 while the last change of the --watch directory failed to apply."}),
	}
	if dir != "" {
		reg.MustRegister(w.failures, w.failing)
	}
	return w
}

func (w *watchHealth) applied(_ store.Result, err error) {
	if errors.Is(err, context.Canceled) {
		return // shutting down
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
	if err != nil {
		w.failures.Inc()
		w.failing.Set(1)
	} else {
		w.failing.Set(0)
	}
}

func (w *watchHealth) degraded() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lastErr == nil {
		return ""
	}
	return fmt.Sprintf("--watch %s: the last change was not applied (the last good state is served): %v", w.dir, w.lastErr)
}

// watchOwned is admin.Options.Owned for a server watching dir (nil
// without --watch).
func watchOwned(st store.Store, dir string) func(context.Context) (map[resource.Key]string, error) {
	if dir == "" {
		return nil
	}
	return func(ctx context.Context) (map[resource.Key]string, error) {
		return origin.Owned(ctx, st, dir)
	}
}

// verifyHealth keeps the outcome of the last background check of the
// store: pages overwritten behind the server's back would otherwise go
// unnoticed until the next start refused the file, while backups copied
// the damage.
type verifyHealth struct {
	mu      sync.Mutex
	damaged string // the last check's error, "" when it passed
}

// run checks the store every interval until ctx ends.
func (v *verifyHealth) run(ctx context.Context, c store.Checker, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		err := c.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		v.mu.Lock()
		was := v.damaged
		v.damaged = ""
		if err != nil {
			v.damaged = err.Error()
		}
		v.mu.Unlock()
		switch {
		case err != nil:
			log.Error("store check found damage; serving what is loaded, /readyz degraded", "error", err)
		case was != "":
			log.Info("store check passed again", "took", time.Since(start).Round(time.Millisecond))
		default:
			log.Debug("store checked", "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

func (v *verifyHealth) degraded() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.damaged
}
