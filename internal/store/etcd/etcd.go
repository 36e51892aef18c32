package etcd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/xdsd/xdsd/internal/store"
	"github.com/xdsd/xdsd/resource"
)

// Limits of one etcd request, under etcd's defaults (--max-txn-ops 128,
// --max-request-bytes 1.5 MiB).
const (
	txnOps      = 120
	chunkBytes  = 1 << 20
	inlineBytes = 512 << 10
	pageSize    = 5000
)

// DefaultHistory is how many revisions are kept: their records and undo
// data in etcd (history, rollback), and in each replica's memory with
// their change log (watchers resuming from a revision).
const DefaultHistory = 1000

// ErrContended is returned by an Apply that lost the race for the commit
// to other writers MaxAttempts times in a row.
var ErrContended = errors.New("etcd store: other writers committed first every time; nothing was applied, retry")

// ErrUnreachable wraps the error of an Apply that could not reach etcd.
var ErrUnreachable = errors.New("etcd unreachable")

// Options tune a Store.
type Options struct {
	// Endpoints are the etcd members, host:port.
	Endpoints []string
	// Prefix is the key prefix everything is kept under ("/xdsd/" when
	// empty). Replicas sharing a prefix share a state.
	Prefix string
	// RequestTimeout bounds each etcd request of an Apply, so that an
	// unreachable etcd fails it fast (5s when zero).
	RequestTimeout time.Duration
	// LeaseTTL is how long a dead writer's prewritten batch is kept before it
	// may be cleaned up (30s when zero).
	LeaseTTL time.Duration
	// MaxAttempts is how many times an Apply plans again after another
	// writer committed first (20 when zero).
	MaxAttempts int
	// History is how many revisions of changes are kept in memory
	// (DefaultHistory when zero).
	History int
	// Logger receives the watch's troubles (slog.Default when nil).
	Logger *slog.Logger
	// ProbeInterval is how often the Store checks that a quorum of etcd
	// answers, for Unreachable (2s when zero).
	ProbeInterval time.Duration
	// TLS, when set, is the client TLS configuration for the members
	// (ClientTLS makes one from files); nil connects in plaintext.
	TLS *tls.Config
	// Username and Password authenticate to etcd when its auth is
	// enabled; empty Username: no authentication.
	Username, Password string
	// Repair opens a store even when records under its prefix do not
	// decode (edited or damaged behind xdsd's back, which makes a plain
	// Open fail): they are left out of the state, and the next Apply that
	// commits deletes each one it does not put, in the same transaction.
	// It is how xdsd restore replaces damaged contents; a server does not
	// set it, as it would serve a state without those records.
	Repair bool
}

// ClientTLS makes the TLS configuration of a client of etcd from PEM
// files: certFile and keyFile, the client certificate etcd checks with
// --client-cert-auth (both or neither), and caFile, the CA that signed
// the members' certificates (empty: the system's roots).
func ClientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcd client certificate: give both --etcd-cert and --etcd-key, or neither")
	}
	if certFile != "" {
		kp, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate %s, key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("etcd CA %s: no PEM certificate in it; want the CA certificate that signed the etcd members' certificates", caFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// ParseURL parses etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
func ParseURL(u string) (Options, error) {
	rest, ok := strings.CutPrefix(u, "etcd://")
	if !ok {
		return Options{}, fmt.Errorf("%q: want etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", u)
	}
	hosts, prefix, _ := strings.Cut(rest, "/")
	var o Options
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return Options{}, fmt.Errorf("%q: endpoint %q: want HOST:PORT", u, h)
		}
		o.Endpoints = append(o.Endpoints, h)
	}
	if prefix != "" {
		o.Prefix = "/" + strings.Trim(prefix, "/") + "/"
	}
	return o, nil
}

// head is the record readers follow.
type head struct {
	Rev int64 `json:"rev"`
	// Batch names the prewritten batch of the last commit ("" when it was
	// committed inline, in Plan).
	Batch string `json:"batch,omitempty"`
	// Applied says the prewritten batch has been copied into r/ and m/.
	Applied bool   `json:"applied,omitempty"`
	Plan    []byte `json:"plan,omitempty"`
}

// Store is a store.Store kept in etcd.
type Store struct {
	c      *clientv3.Client
	o      Options
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	headVer int64           // etcd version of the head the copy holds (0: none)
	st      *store.MemState // the copy of the committed state, with its history
	notify  store.Notifier
	closed  bool
	unreach string // why etcd was last found unreachable, "" when fine
	// damage is the last full read's (a reload, Check) damaged record, ""
	// when it found none: /readyz shows it while the replica serves the
	// state it loaded before.
	damage string
	// repair: the keys under r/ (after it) of the records a Repair open
	// left out; the next commit deletes those it does not put.
	repair [][]byte
}

// Open connects to etcd, loads the state under the prefix and follows it.
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("etcd store: no endpoints")
	}
	if o.Prefix == "" {
		o.Prefix = "/xdsd/"
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 20
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:           o.Endpoints,
		DialTimeout:         o.RequestTimeout,
		Logger:              zap.NewNop(),
		MaxCallSendMsgSize:  2 << 20,
		MaxCallRecvMsgSize:  1 << 30,
		PermitWithoutStream: true,
		TLS:                 o.TLS,
		Username:            o.Username,
		Password:            o.Password,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd store %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	s := &Store{c: c, o: o, log: o.Logger, st: store.NewMemState(o.History), done: make(chan struct{})}
	lctx, cancel := context.WithTimeout(ctx, 4*o.RequestTimeout)
	defer cancel()
	erev, err := s.reload(lctx)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("etcd store %s: loading %s: %w", strings.Join(o.Endpoints, ","), o.Prefix, unreachable(err))
	}
	s.cleanPrewrites(lctx)
	wctx, wcancel := context.WithCancel(context.Background())
	s.cancel = wcancel
	go s.follow(wctx, erev)
	return s, nil
}

func (s *Store) key(parts ...string) string { return s.o.Prefix + strings.Join(parts, "") }

func (s *Store) headKey() string { return s.key("head") }

func unreachable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrNoLeader) {
		return fmt.Errorf("%w (no answer from a quorum): %v", ErrUnreachable, err)
	}
	return err
}

// rctx bounds one request.
func (s *Store) rctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.o.RequestTimeout)
}

// Unreachable says why etcd could not be reached the last time the store
// tried, or "" when it could: /readyz shows it while the replica keeps
// serving what it holds.
func (s *Store) Unreachable() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unreach
}

func (s *Store) setReach(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.unreach = ""
	} else {
		s.unreach = fmt.Sprintf("etcd store unreachable (%s): %v", strings.Join(s.o.Endpoints, ","), err)
	}
}

// plan operations, as prewritten and as carried in head.
const (
	opPut     = 1 // bytes: resKey, record
	opDelete  = 2 // bytes: resKey
	opMeta    = 3 // bytes: key, value
	opDelMeta = 4 // bytes: key
	opRev     = 5 // bytes: revision (16 digits), record without its changes
	opChange  = 6 // bytes: revision/resKey, change kind byte and the variant it replaced
)

// Change kinds, the first byte of an opChange value.
const (
	chCreated = 'c'
	chUpdated = 'u'
	chDeleted = 'd'
)

func revKey(rev int64) string { return fmt.Sprintf("%016d", rev) }

type op struct {
	kind int
	key  []byte // resource key or metadata key
	val  []byte // record or metadata value
}

func (o op) size() int { return len(o.key) + len(o.val) + 16 }

func (o op) hasVal() bool { return o.kind != opDelete && o.kind != opDelMeta }

func encodeOp(b []byte, o op) []byte {
	var in []byte
	in = protowire.AppendBytes(in, o.key)
	if o.hasVal() {
		in = protowire.AppendBytes(in, o.val)
	}
	b = protowire.AppendTag(b, protowire.Number(o.kind), protowire.BytesType)
	return protowire.AppendBytes(b, in)
}

func decodeOps(b []byte) ([]op, error) {
	var out []op
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, errors.New("corrupt prewritten batch")
		}
		b = b[n:]
		in, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, errors.New("corrupt prewritten batch")
		}
		b = b[n:]
		o := op{kind: int(num)}
		k, n := protowire.ConsumeBytes(in)
		if n < 0 {
			return nil, errors.New("corrupt prewritten batch")
		}
		o.key = k
		if o.hasVal() {
			v, m := protowire.ConsumeBytes(in[n:])
			if m < 0 {
				return nil, errors.New("corrupt prewritten batch")
			}
			o.val = v
		}
		out = append(out, o)
	}
	return out, nil
}

// etcdOp is the write that materializes o under r/ or m/.
func (s *Store) etcdOp(o op) clientv3.Op {
	switch o.kind {
	case opPut:
		return clientv3.OpPut(s.key("r/", string(o.key)), string(o.val))
	case opDelete:
		return clientv3.OpDelete(s.key("r/", string(o.key)))
	case opMeta:
		return clientv3.OpPut(s.key("m/", string(o.key)), string(o.val))
	case opRev:
		return clientv3.OpPut(s.key("hr/", string(o.key)), string(o.val))
	case opChange:
		return clientv3.OpPut(s.key("hu/", string(o.key)), string(o.val))
	default:
		return clientv3.OpDelete(s.key("m/", string(o.key)))
	}
}

// trimOps delete the history older than the History revisions up to rev.
func (s *Store) trimOps(rev int64) []clientv3.Op {
	keep := rev - int64(s.o.History) + 1
	if keep <= 1 {
		return nil
	}
	return []clientv3.Op{
		clientv3.OpDelete(s.key("hr/"), clientv3.WithRange(s.key("hr/", revKey(keep)))),
		clientv3.OpDelete(s.key("hu/"), clientv3.WithRange(s.key("hu/", revKey(keep)))),
	}
}

// Apply implements store.Store.
func (s *Store) Apply(ctx context.Context, b store.Batch) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	for attempt := 0; attempt < s.o.MaxAttempts; attempt++ {
		if s.isClosed() {
			return store.Result{}, store.ErrClosed
		}
		res, retry, err := s.try(ctx, b)
		if err != nil {
			if errors.Is(err, ErrUnreachable) {
				s.setReach(err)
			}
			return store.Result{}, err
		}
		s.setReach(nil)
		if !retry {
			return res, nil
		}
		if attempt > 2 {
			select { // back off a little when contended
			case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
			case <-ctx.Done():
				return store.Result{}, ctx.Err()
			}
		}
	}
	return store.Result{}, ErrContended
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// readHead reads head at the current etcd revision. While the probe finds
// etcd unreachable, it waits only a second for it, so that an apply fails
// fast.
func (s *Store) readHead(ctx context.Context) (*clientv3.GetResponse, error) {
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	if s.Unreachable() != "" {
		rctx, cancel = context.WithTimeout(rctx, time.Second)
		defer cancel()
	}
	resp, err := s.c.Get(rctx, s.headKey())
	if err != nil {
		return nil, unreachable(err)
	}
	return resp, nil
}

func decodeHead(b []byte) (head, error) {
	var h head
	if err := json.Unmarshal(b, &h); err != nil {
		return head{}, fmt.Errorf("corrupt head: %w", err)
	}
	return h, nil
}

// try makes one attempt: retry reports that another writer committed
// first.
func (s *Store) try(ctx context.Context, b store.Batch) (store.Result, bool, error) {
	resp, err := s.readHead(ctx)
	if err != nil {
		return store.Result{}, false, err
	}
	var h head
	var modRev, ver int64
	if len(resp.Kvs) == 1 {
		kv := resp.Kvs[0]
		modRev, ver = kv.ModRevision, kv.Version
		if h, err = decodeHead(kv.Value); err != nil {
			return store.Result{}, false, err
		}
		if h.Batch != "" && !h.Applied {
			// A committed batch whose copy into r/ was not finished.
			if err := s.materialize(ctx, h, modRev); err != nil {
				return store.Result{}, false, err
			}
			return store.Result{}, true, nil
		}
	}
	if err := s.syncTo(ctx, resp); err != nil {
		return store.Result{}, false, err
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.Result{}, false, store.ErrClosed
	}
	if s.headVer != ver { // the watch moved the copy on meanwhile
		s.mu.Unlock()
		return store.Result{}, true, nil
	}
	if err := store.CheckIfRev(b, h.Rev); err != nil {
		s.mu.Unlock()
		return store.Result{}, false, err
	}
	// Planned against the replica's copy; the commit's compare on head
	// makes sure the copy was current.
	p, err := store.MakePlan(s.st, b, h.Rev+1)
	if err != nil {
		s.mu.Unlock()
		return store.Result{}, false, err
	}
	metaChanged := false
	for k, v := range p.Meta {
		if !s.st.MetaEqual(k, v) {
			metaChanged = true
		}
	}
	repair := s.repair
	s.mu.Unlock()
	if p.Empty() && !metaChanged && len(repair) == 0 {
		return store.Result{Rev: h.Rev}, false, nil
	}

	nh := head{Rev: h.Rev}
	if !p.Empty() || len(repair) > 0 {
		nh.Rev++
	}
	ops, err := planOps(p, nh.Rev, b.Audit, repair)
	if err != nil {
		return store.Result{}, false, err
	}
	size := 0
	for _, o := range ops {
		size += o.size()
	}
	var cmp clientv3.Cmp
	if ver == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(s.headKey()), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.ModRevision(s.headKey()), "=", modRev)
	}

	var commitRev int64
	if len(ops) <= txnOps && size <= inlineBytes {
		var enc []byte
		for _, o := range ops {
			enc = encodeOp(enc, o)
		}
		nh.Plan = enc
		hb, _ := json.Marshal(nh)
		then := []clientv3.Op{clientv3.OpPut(s.headKey(), string(hb))}
		for _, o := range ops {
			then = append(then, s.etcdOp(o))
		}
		then = append(then, s.trimOps(nh.Rev)...)
		rctx, cancel := s.rctx(ctx)
		tr, err := s.c.Txn(rctx).If(cmp).Then(then...).Commit()
		cancel()
		if err != nil {
			return store.Result{}, false, s.commitErr(ctx, err)
		}
		if !tr.Succeeded {
			return store.Result{}, true, nil
		}
		commitRev = tr.Header.Revision
	} else {
		rev, id, won, err := s.commitPrewritten(ctx, ops, nh, cmp)
		if err != nil || !won {
			return store.Result{}, !won && err == nil, err
		}
		commitRev = rev
		if err := s.materialize(ctx, head{Rev: nh.Rev, Batch: id}, commitRev); err != nil {
			// Committed all the same: the next writer finishes the copy.
			s.log.Warn("etcd store: copying a committed batch failed; the next apply finishes it", "rev", nh.Rev, "err", err)
		}
	}
	// Bring the copy to the commit: directly when nothing came between.
	s.mu.Lock()
	if s.headVer == ver {
		s.applyOps(nh.Rev, ops)
		s.headVer = ver + 1
	}
	s.mu.Unlock()
	if len(repair) > 0 {
		s.mu.Lock()
		s.repair = nil
		s.mu.Unlock()
		// A warning: it names what was wrong, and xdsd restore, which
		// shows warnings only, says it.
		keys := make([]string, len(repair))
		for i, k := range repair {
			keys[i] = strconv.Quote(s.key("r/", string(k)))
		}
		s.log.Warn("etcd store: damaged records replaced (or deleted, if the batch does not put them)", "rev", nh.Rev, "keys", strings.Join(keys, " "))
	}
	if err := s.waitVer(ctx, ver+1, commitRev); err != nil {
		return store.Result{}, false, err
	}
	if p.Empty() {
		return store.Result{Rev: nh.Rev}, false, nil
	}
	return p.Result(nh.Rev), false, nil
}

// commitErr explains a failed commit: whether it landed is unknown when
// the request timed out, so say so.
func (s *Store) commitErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("etcd store: commit: %w (whether it landed is unknown if etcd went away during it: read the store)", unreachable(err))
}

// waitVer makes sure the copy holds head version ver (etcd revision erev),
// catching up from etcd when the watch has not brought it yet.
func (s *Store) waitVer(ctx context.Context, ver, erev int64) error {
	s.mu.Lock()
	have := s.headVer
	s.mu.Unlock()
	if have >= ver {
		return nil
	}
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	resp, err := s.c.Get(rctx, s.headKey(), clientv3.WithRev(erev))
	if err != nil {
		return unreachable(err)
	}
	return s.syncTo(ctx, resp)
}

// planOps turns plan p, committed as revision rev, into the writes that
// store it: the variants and metadata, and the revision's history record
// and undo data. repair are damaged records (Options.Repair): each one the
// plan does not put is deleted, and listed in the revision as deleted.
func planOps(p store.Plan, rev int64, a store.Audit, repair [][]byte) ([]op, error) {
	var ops []op
	put := make(map[string]bool, len(p.Puts))
	if len(repair) > 0 {
		for _, v := range p.Puts {
			put[string(store.ResKey(v.Key()))] = true
		}
	}
	var drop [][]byte
	for _, k := range repair {
		if !put[string(k)] {
			drop = append(drop, k)
		}
	}
	if !p.Empty() || len(repair) > 0 {
		r := store.NewRevision(rev, time.Now(), a, p)
		r.Changes = nil // kept as opChange, one per key
		rb, err := store.MarshalRevision(r)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op{kind: opRev, key: []byte(revKey(rev)), val: rb})
		change := func(k resource.Key, kind byte) error {
			val := []byte{kind}
			if prev := p.Prev[k]; prev != nil {
				pb, err := store.EncodeRecord(prev)
				if err != nil {
					return err
				}
				val = append(val, pb...)
			}
			ops = append(ops, op{kind: opChange, key: append([]byte(revKey(rev)+"/"), store.ResKey(k)...), val: val})
			return nil
		}
		for _, v := range p.Puts {
			kind := byte(chCreated)
			if p.Prev[v.Key()] != nil {
				kind = chUpdated
			}
			if err := change(v.Key(), kind); err != nil {
				return nil, err
			}
		}
		for _, k := range p.Deletes {
			if err := change(k, chDeleted); err != nil {
				return nil, err
			}
		}
		for _, k := range drop {
			if _, err := store.SplitKey(k); err == nil { // history lists resources only
				ops = append(ops, op{kind: opChange, key: append([]byte(revKey(rev)+"/"), k...), val: []byte{chDeleted}})
			}
		}
	}
	for _, k := range p.Deletes {
		ops = append(ops, op{kind: opDelete, key: store.ResKey(k)})
	}
	for _, k := range drop {
		ops = append(ops, op{kind: opDelete, key: k})
	}
	for _, v := range p.Puts {
		rec, err := store.EncodeRecord(v)
		if err != nil {
			return nil, err
		}
		o := op{kind: opPut, key: store.ResKey(v.Key()), val: rec}
		if o.size() > chunkBytes {
			return nil, &store.BatchError{Problems: []error{fmt.Errorf("%s is %d bytes, more than etcd takes in one request (%d)", v.Key(), len(rec), chunkBytes)}}
		}
		ops = append(ops, o)
	}
	keys := make([]string, 0, len(p.Meta))
	for k := range p.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := p.Meta[k]; v == nil {
			ops = append(ops, op{kind: opDelMeta, key: []byte(k)})
		} else {
			ops = append(ops, op{kind: opMeta, key: []byte(k), val: v})
		}
	}
	return ops, nil
}

// applyOps applies a committed plan to the copy. Guarded by mu.
func (s *Store) applyOps(rev int64, ops []op) {
	keys := applyTo(s.st, ops, s.log)
	if rev > s.st.Rev() {
		e := store.LogEntry{Rev: rev, Keys: keys}
		hist := historyOf(ops, s.log)
		if len(hist) == 1 && hist[0].Rev == rev {
			e.Rec, e.Undo = hist[0].Rec, hist[0].Undo
		}
		s.st.Record(e)
		s.notify.Wake()
	}
}

// crashHook, set by tests, runs at the points of a prewritten apply where a
// writer may die: after a chunk is prewritten, after the commit, after a part
// of the copy.
var crashHook func(point string)

func crashPoint(p string) {
	if crashHook != nil {
		crashHook(p)
	}
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// commitPrewritten prewrites ops under a new batch and commits it; won is false
// when another writer committed first.
func (s *Store) commitPrewritten(ctx context.Context, ops []op, nh head, cmp clientv3.Cmp) (rev int64, id string, won bool, err error) {
	s.cleanPrewrites(ctx)
	id = newID()
	marker := s.key("s/", id, "/m")
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	rctx, cancel := s.rctx(ctx)
	lease, err := s.c.Grant(rctx, int64(s.o.LeaseTTL/time.Second)+1)
	cancel()
	if err != nil {
		return 0, "", false, unreachable(err)
	}
	ka, err := s.c.KeepAlive(lctx, lease.ID)
	if err != nil {
		return 0, "", false, unreachable(err)
	}
	go func() {
		for range ka { // drain: the client stops when lctx ends
		}
	}()
	defer func() { // the marker goes; committed chunks stay for the copy
		rctx, cancel := s.rctx(context.WithoutCancel(ctx))
		s.c.Revoke(rctx, lease.ID)
		cancel()
	}()
	rctx, cancel = s.rctx(ctx)
	mresp, err := s.c.Put(rctx, marker, "", clientv3.WithLease(lease.ID))
	cancel()
	if err != nil {
		return 0, "", false, unreachable(err)
	}
	markerRev := mresp.Header.Revision
	markerCmp := clientv3.Compare(clientv3.CreateRevision(marker), "=", markerRev)
	abandon := func() {
		rctx, cancel := s.rctx(context.WithoutCancel(ctx))
		s.c.Delete(rctx, s.key("s/", id, "/"), clientv3.WithPrefix())
		cancel()
	}
	n := 0
	var chunk []byte
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		rctx, cancel := s.rctx(ctx)
		defer cancel()
		tr, err := s.c.Txn(rctx).If(markerCmp).Then(clientv3.OpPut(s.key("s/", id, fmt.Sprintf("/c/%08d", n)), string(chunk))).Commit()
		if err != nil {
			return unreachable(err)
		}
		if !tr.Succeeded {
			return fmt.Errorf("etcd store: prewritten batch %s was cleaned up while being written (its lease expired)", id)
		}
		n++
		chunk = chunk[:0]
		crashPoint("prewrite")
		return nil
	}
	for _, o := range ops {
		if len(chunk)+o.size() > chunkBytes {
			if err := flush(); err != nil {
				abandon()
				return 0, "", false, err
			}
		}
		chunk = encodeOp(chunk, o)
	}
	if err := flush(); err != nil {
		abandon()
		return 0, "", false, err
	}
	nh.Batch = id
	hb, _ := json.Marshal(nh)
	rctx, cancel = s.rctx(ctx)
	tr, err := s.c.Txn(rctx).If(cmp, markerCmp).Then(clientv3.OpPut(s.headKey(), string(hb))).Commit()
	cancel()
	if err != nil {
		return 0, "", false, s.commitErr(ctx, err)
	}
	if !tr.Succeeded {
		abandon()
		return 0, "", false, nil
	}
	crashPoint("committed")
	return tr.Header.Revision, id, true, nil
}

// prewrittenOps reads a prewritten batch at etcd revision erev (0: current).
func (s *Store) prewrittenOps(ctx context.Context, id string, erev int64) ([]op, error) {
	var ops []op
	err := s.scan(ctx, s.key("s/", id, "/c/"), erev, false, func(_, v []byte) error {
		o, err := decodeOps(v)
		ops = append(ops, o...)
		return err
	})
	return ops, err
}

// scan reads every key under prefix at etcd revision erev (0: current),
// page by page.
func (s *Store) scan(ctx context.Context, prefix string, erev int64, keysOnly bool, fn func(k, v []byte) error) error {
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if erev > 0 {
			opts = append(opts, clientv3.WithRev(erev))
		}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		rctx, cancel := s.rctx(ctx)
		resp, err := s.c.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return unreachable(err)
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// materialize copies committed batch h (head at mod revision modRev) into
// r/ and m/, then marks it applied and drops its chunks. Every write is
// guarded by head being unchanged, so a late copy never overwrites a
// later batch.
func (s *Store) materialize(ctx context.Context, h head, modRev int64) error {
	ops, err := s.prewrittenOps(ctx, h.Batch, 0)
	if err != nil {
		return err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(s.headKey()), "=", modRev)
	for i := 0; i < len(ops); {
		var then []clientv3.Op
		size := 0
		for ; i < len(ops) && len(then) < txnOps && size+ops[i].size() <= chunkBytes; i++ {
			then = append(then, s.etcdOp(ops[i]))
			size += ops[i].size()
		}
		rctx, cancel := s.rctx(ctx)
		tr, err := s.c.Txn(rctx).If(cmp).Then(then...).Commit()
		cancel()
		if err != nil {
			return unreachable(err)
		}
		if !tr.Succeeded {
			return nil // someone else finished it
		}
		crashPoint("copying")
	}
	h.Applied = true
	hb, _ := json.Marshal(h)
	rctx, cancel := s.rctx(ctx)
	defer cancel()
	_, err = s.c.Txn(rctx).If(cmp).Then(append([]clientv3.Op{
		clientv3.OpPut(s.headKey(), string(hb)),
		clientv3.OpDelete(s.key("s/", h.Batch, "/"), clientv3.WithPrefix()),
	}, s.trimOps(h.Rev)...)...).Commit()
	return unreachable(err)
}

// cleanPrewrites deletes prewritten batches whose writer is gone (marker
// expired) and that head does not name.
func (s *Store) cleanPrewrites(ctx context.Context) {
	resp, err := s.readHead(ctx)
	if err != nil {
		return
	}
	pending := ""
	if len(resp.Kvs) == 1 {
		if h, err := decodeHead(resp.Kvs[0].Value); err == nil && !h.Applied {
			pending = h.Batch
		}
	}
	ids := map[string]bool{} // id → marker present
	prefix := s.key("s/")
	err = s.scan(ctx, prefix, resp.Header.Revision, true, func(k, _ []byte) error {
		id, rest, _ := strings.Cut(strings.TrimPrefix(string(k), prefix), "/")
		ids[id] = ids[id] || rest == "m"
		return nil
	})
	if err != nil {
		return
	}
	for id, alive := range ids {
		if alive || id == pending {
			continue
		}
		rctx, cancel := s.rctx(ctx)
		s.c.Delete(rctx, s.key("s/", id, "/"), clientv3.WithPrefix())
		cancel()
		s.log.Info("etcd store: removed an abandoned prewritten batch", "batch", id)
	}
}
