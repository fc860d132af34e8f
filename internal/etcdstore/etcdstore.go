package etcdstore

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	etcdcfg "github.com/kelemetry/kelemetry/diff/changes/etcdstore"
	"github.com/kelemetry/kelemetry/internal/backoff"
	"github.com/kelemetry/kelemetry/internal/changes"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/objdiff"
	"github.com/kelemetry/kelemetry/internal/ratelog"
	"github.com/kelemetry/kelemetry/telemetry"
)

// meterScope is the instrumentation scope of the diff packages' metrics.
const meterScope = "github.com/kelemetry/kelemetry/diff"

// clientConfig builds the etcd client configuration of c, reading the password and TLS files.
func clientConfig(c etcdcfg.Config) (clientv3.Config, error) {
	cc := clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: c.DialTimeout,
		Username:    c.Username,
		Password:    c.Password,
		Logger:      zap.NewNop(),
		// Without keepalives a silently lost connection would stall the watch.
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
	}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return cc, fmt.Errorf("diff informer cache: etcd password: %w", err)
		}
		cc.Password = strings.TrimRight(string(b), "\r\n")
	}
	useTLS := c.CAFile != "" || c.CertFile != "" || c.ServerName != ""
	for _, ep := range c.Endpoints {
		useTLS = useTLS || strings.HasPrefix(ep, "https://")
	}
	if !useTLS {
		return cc, nil
	}
	// The etcd client drops the TLS configuration for http:// endpoints (plaintext, despite the
	// TLS files): dial them as https://.
	cc.Endpoints = make([]string, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		if rest, ok := strings.CutPrefix(ep, "http://"); ok {
			ep = "https://" + rest
		}
		cc.Endpoints[i] = ep
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return cc, fmt.Errorf("diff informer cache: etcd CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return cc, fmt.Errorf("diff informer cache: etcd CA %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return cc, fmt.Errorf("diff informer cache: etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if c.ServerName != "" {
		// gRPC checks the certificate against the endpoint's host, not tls.Config.ServerName,
		// unless the authority says otherwise.
		cc.DialOptions = append(cc.DialOptions, grpc.WithAuthority(c.ServerName))
	}
	cc.TLS = tc
	return cc, nil
}

// Store is a changes.Store shared by replicas through etcd.
//
// Put (called by the leading replica's informers only) keeps the record in a local changes.Cache at
// once and queues it, bounded, for a writer goroutine that writes batches of records into etcd in
// one transaction each, every key attached to a lease of TTL (one lease is shared by the keys of
// TTL/10, so etcd removes every record between TTL and TTL + TTL/10 after it was written). Keys are
// <prefix><cluster>/<group>/<resource>/<namespace>/<name>/<resourceVersion> (segments
// path-escaped, empty ones kept); values are a compact JSON encoding of the record, deflated when
// that is shorter.
//
// Every replica mirrors the prefix into its local Cache: it loads it once, then watches it,
// and mirrors removals (lease expiry) too; after a watch error (compaction, lost leader, etcd
// down) it loads again, with backoff. Find reads the local changes.Cache only, so it never waits
// on etcd: the audit consumer's bounded wait covers the watch's delay, and when etcd is
// unreachable the records do not arrive and the consumer's events go out with "diff unavailable"
// after their deadline. The mirror is bounded like any changes.Cache (informer.Config.Cache).
//
// Errors and drops are counted (kelemetry.diff.etcd.records, kelemetry.diff.etcd.errors) and
// logged at most every few seconds. Start and Stop it once.
type Store struct {
	cfg    etcdcfg.Config
	cc     clientv3.Config
	local  *changes.Cache
	logger *slog.Logger

	mu         sync.Mutex
	queue      []changes.Record
	queueBytes int64
	stopped    bool
	wake       chan struct{}

	// loops runs the connection, the mirror and the writer, set by Start: stopping it ends
	// mirroring and makes the writer flush; endWrites ends the writes (Stop calls it at the flush
	// deadline, or when its context ends).
	loops     *loop.Group
	endWrites context.CancelFunc
	ready     chan struct{} // closed once the first load of the prefix is applied
	readyMu   sync.Once

	records  metric.Int64Counter
	errs     metric.Int64Counter
	writeDur metric.Float64Histogram
	opts     map[string]metric.MeasurementOption
	errWarn  ratelog.Limiter
}

// etcd record results and error operations (metric attributes).
const (
	etcdWritten    = "written"
	etcdQueueFull  = "queue_full"
	etcdTooLarge   = "too_large"
	etcdWriteError = "write_error"
	etcdStopped    = "stopped"
	etcdReplaced   = "replaced"
	etcdMirrored   = "mirrored"
	etcdRemoved    = "removed"

	etcdOpConnect = "connect"
	etcdOpLease   = "lease"
	etcdOpPut     = "put"
	etcdOpLoad    = "load"
	etcdOpWatch   = "watch"
	etcdOpDecode  = "decode"
	etcdOpEncode  = "encode"
)

// New builds a Store that mirrors into local (required; its bounds apply). It does not
// connect yet: Start does, in the background, so an unreachable etcd does not fail the
// application. ts gives its logger and meter provider (either may be unset).
func New(cfg etcdcfg.Config, local *changes.Cache, ts telemetry.Settings) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if local == nil {
		return nil, errors.New("diff informer cache: nil local change cache")
	}
	cfg = cfg.WithDefaults()
	cc, err := clientConfig(cfg)
	if err != nil {
		return nil, err
	}
	e := &Store{
		cfg: cfg, cc: cc, local: local, wake: make(chan struct{}, 1), ready: make(chan struct{}),
		logger:  ts.Log().With("component", "diff.etcdcache", "prefix", cfg.Prefix),
		opts:    map[string]metric.MeasurementOption{},
		errWarn: ratelog.Limiter{Every: 10 * time.Second},
	}
	results := []string{etcdWritten, etcdQueueFull, etcdTooLarge, etcdWriteError, etcdStopped, etcdReplaced, etcdMirrored, etcdRemoved}
	resultSets := instrument.Sets("result", results...)
	for i, r := range results {
		e.opts["result:"+r] = metric.WithAttributeSet(resultSets[i])
	}
	ops := []string{etcdOpConnect, etcdOpLease, etcdOpPut, etcdOpLoad, etcdOpWatch, etcdOpDecode, etcdOpEncode}
	opSets := instrument.Sets("op", ops...)
	for i, op := range ops {
		e.opts["op:"+op] = metric.WithAttributeSet(opSets[i])
	}
	meter := instrument.NewMeter(ts, meterScope)
	e.records = meter.Counter("kelemetry.diff.etcd.records",
		"Informer diff records through etcd, by result (written, queue_full, too_large, write_error, stopped, replaced (by a later record of the same key in the same batch): by the leader; mirrored, removed: by every replica).", "{record}",
		resultSets...)
	e.errs = meter.Counter("kelemetry.diff.etcd.errors",
		"Failed etcd operations of the informer diff cache, by operation (connect, lease, put, load, watch, decode, encode).", "{error}", opSets...)
	e.writeDur = meter.Histogram("kelemetry.diff.etcd.write.duration",
		"Time to write one batch of informer diff records into etcd.", "s",
		0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("diff etcd cache: %w", err)
	}
	return e, nil
}

// Local is the local mirror Find reads.
func (e *Store) Local() *changes.Cache { return e.local }

// Ready is closed once the first load of the prefix from etcd is applied to the mirror.
func (e *Store) Ready() <-chan struct{} { return e.ready }

// Find looks q up in the local mirror; it never waits on etcd.
func (e *Store) Find(q changes.Query) (changes.Record, bool) { return e.local.Find(q) }

// Put keeps rec locally and queues it for etcd; a full queue drops it (counted).
func (e *Store) Put(rec changes.Record) {
	e.local.Put(rec)
	size := rec.Size()
	e.mu.Lock()
	switch {
	case e.stopped:
		e.mu.Unlock()
		e.count(etcdStopped, 1)
		return
	case len(e.queue) >= e.cfg.MaxQueue || e.queueBytes+size > e.cfg.MaxQueueBytes:
		e.mu.Unlock()
		e.count(etcdQueueFull, 1)
		return
	}
	e.queue = append(e.queue, rec)
	e.queueBytes += size
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Store) count(result string, n int) {
	e.records.Add(context.Background(), int64(n), e.opts["result:"+result])
}

func (e *Store) fail(op string, err error) {
	e.errs.Add(context.Background(), 1, e.opts["op:"+op])
	if ok, suppressed := e.errWarn.Allow(time.Now()); ok {
		e.logger.Warn("etcd diff cache: "+op+" failed", "error", err, "suppressed", suppressed)
	}
}

// Start connects in the background (retrying with backoff), then writes the queued records and
// mirrors the prefix until Stop.
func (e *Store) Start(_ context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loops != nil {
		return errors.New("diff etcd cache: already started")
	}
	// Writes do not end with the loop's context: a batch in flight when Stop is called would be
	// lost.
	writeCtx, endWrites := context.WithCancel(context.Background())
	e.loops, e.endWrites = &loop.Group{}, endWrites
	e.loops.Start(func(ctx context.Context) {
		defer endWrites()
		e.run(ctx, writeCtx)
	})
	return nil
}

// Stop stops mirroring, writes what is queued within ctx (the rest is counted as stopped), and
// closes the connection.
func (e *Store) Stop(ctx context.Context) error {
	e.mu.Lock()
	loops, endWrites := e.loops, e.endWrites
	e.stopped = true
	e.mu.Unlock()
	if loops == nil {
		e.dropQueue()
		return nil
	}
	// The writer flushes the queue for up to RequestTimeout, and half the time left to ctx's
	// deadline, before giving up.
	flushFor := e.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		flushFor = min(flushFor, time.Until(dl)/2)
	}
	// The flush ends at its deadline, or earlier when ctx ends (then Stop returns too).
	flushCtx, cancelFlush := context.WithTimeout(ctx, flushFor)
	defer cancelFlush()
	stopFlush := context.AfterFunc(flushCtx, endWrites)
	defer stopFlush()
	if err := loops.Stop(ctx, "diff etcd cache"); err != nil {
		endWrites() // also when stopFlush runs before the AfterFunc does
		return err
	}
	return nil
}

func (e *Store) dropQueue() {
	e.mu.Lock()
	n := len(e.queue)
	e.queue, e.queueBytes = nil, 0
	e.mu.Unlock()
	if n > 0 {
		e.count(etcdStopped, n)
	}
}

// retry spaces the retries of a failed connection, load or watch.
var retry = backoff.Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second}

func (e *Store) run(ctx, writeCtx context.Context) {
	var cli *clientv3.Client
	for attempt := 0; ; attempt++ {
		var err error
		if cli, err = clientv3.New(e.withCtx(ctx)); err == nil {
			break
		}
		e.fail(etcdOpConnect, err)
		if !retry.Sleep(ctx, attempt) {
			e.dropQueue()
			return
		}
	}
	defer cli.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		e.mirror(ctx, cli)
	}()
	go func() {
		defer wg.Done()
		e.writeLoop(ctx, writeCtx, cli)
	}()
	wg.Wait()
}

func (e *Store) withCtx(ctx context.Context) clientv3.Config {
	cc := e.cc
	cc.Context = ctx
	return cc
}

// Bounds of one write transaction: etcd's default limits are 128 operations and 1.5 MiB per
// request.
const (
	etcdBatchOps   = 64
	etcdBatchBytes = 1 << 20
)

// writeLoop writes the queued records in batches until ctx ends, then flushes what is left
// until wctx ends (Stop's flush deadline). Writes use wctx: a batch in flight when ctx ends is
// not lost.
func (e *Store) writeLoop(ctx, wctx context.Context, cli *clientv3.Client) {
	w := &etcdWriter{e: e, cli: cli}
	for {
		select {
		case <-ctx.Done():
			for w.writeBatch(wctx) {
			}
			// What is left is dropped (counted). The lease is not revoked: the records are to
			// outlive this process (another replica may lead next); the lease expires by itself.
			e.dropQueue()
			return
		case <-e.wake:
			for ctx.Err() == nil && w.writeBatch(wctx) {
			}
		}
	}
}

// etcdWriter holds the writer goroutine's lease.
type etcdWriter struct {
	e         *Store
	cli       *clientv3.Client
	lease     clientv3.LeaseID
	leaseTime time.Time
}

// take removes the next batch from the queue.
func (e *Store) take() []changes.Record {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, bytes := 0, int64(0)
	for n < len(e.queue) && n < etcdBatchOps && (n == 0 || bytes+e.queue[n].Size() <= etcdBatchBytes) {
		bytes += e.queue[n].Size()
		n++
	}
	batch := make([]changes.Record, n)
	copy(batch, e.queue)
	clear(e.queue[:n])
	e.queue = e.queue[n:]
	e.queueBytes -= bytes
	if len(e.queue) == 0 {
		e.queue, e.queueBytes = nil, 0
	}
	return batch
}

// writeBatch writes one batch; it reports false when the queue was empty or ctx ended.
func (w *etcdWriter) writeBatch(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	e := w.e
	batch := e.take()
	if len(batch) == 0 {
		return false
	}
	kvs := make([]etcdKV, 0, len(batch))
	var failed int
	// etcd rejects a transaction that puts one key twice (the informer records a final deletion
	// under the key of the object's last change when a relist finds it gone): the later record
	// of a key replaces the earlier one, as in the local cache.
	last := make(map[changes.RecordKey]int, len(batch))
	for i := range batch {
		last[batch[i].Key] = i
	}
	if replaced := len(batch) - len(last); replaced > 0 {
		e.count(etcdReplaced, replaced)
	}
	for i := range batch {
		if last[batch[i].Key] != i {
			continue
		}
		val, err := encodeRecord(&batch[i])
		if err != nil {
			e.fail(etcdOpEncode, err)
			failed++
			continue
		}
		if len(val) > e.cfg.MaxValueBytes {
			e.count(etcdTooLarge, 1)
			continue
		}
		kvs = append(kvs, etcdKV{key: etcdKey(e.cfg.Prefix, batch[i].Key), val: string(val)})
	}
	if failed > 0 {
		e.count(etcdWriteError, failed)
	}
	if len(kvs) == 0 {
		return true
	}
	start := time.Now()
	err := w.put(ctx, kvs)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The lease expired (etcd was down longer than the TTL, or restored): take a new one.
		w.lease = 0
		err = w.put(ctx, kvs)
	}
	e.writeDur.Record(context.Background(), time.Since(start).Seconds())
	if err != nil {
		if !errors.Is(err, errLeaseGrant) { // a failed grant is counted as op lease
			e.fail(etcdOpPut, err)
		}
		e.count(etcdWriteError, len(kvs))
		return ctx.Err() == nil
	}
	e.count(etcdWritten, len(kvs))
	return true
}

type etcdKV struct{ key, val string }

// errLeaseGrant marks a write that failed granting its lease.
var errLeaseGrant = errors.New("grant lease")

// put writes kvs in one transaction, attached to the current lease.
func (w *etcdWriter) put(ctx context.Context, kvs []etcdKV) error {
	e := w.e
	// Keys share a lease for TTL/10 (at least 1s): etcd removes each between TTL and
	// TTL + TTL/10 after its write, with one lease grant per period. The lease lasts
	// TTL + period so that a key written at the end of the period still lives TTL.
	period := max(e.cfg.TTL/10, time.Second)
	if w.lease == 0 || time.Since(w.leaseTime) >= period {
		lctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
		resp, err := w.cli.Grant(lctx, int64((e.cfg.TTL+period+time.Second-1)/time.Second))
		cancel()
		if err != nil {
			e.fail(etcdOpLease, err)
			return fmt.Errorf("%w: %w", errLeaseGrant, err)
		}
		w.lease, w.leaseTime = resp.ID, time.Now()
	}
	ops := make([]clientv3.Op, len(kvs))
	for i, kv := range kvs {
		ops[i] = clientv3.OpPut(kv.key, kv.val, clientv3.WithLease(w.lease))
	}
	pctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
	defer cancel()
	_, err := w.cli.Txn(pctx).Then(ops...).Commit()
	return err
}

// etcdKey is <prefix><cluster>/<group>/<resource>/<namespace>/<name>/<resourceVersion>.
func etcdKey(prefix string, k changes.RecordKey) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(k.Cluster) + len(k.Group) + len(k.Resource) + len(k.Namespace) + len(k.Name) + len(k.ResourceVersion) + 5)
	b.WriteString(prefix)
	for i, seg := range [...]string{k.Cluster, k.Group, k.Resource, k.Namespace, k.Name, k.ResourceVersion} {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(url.PathEscape(seg))
	}
	return b.String()
}

// parseEtcdKey reverses etcdKey.
func parseEtcdKey(prefix, key string) (changes.RecordKey, error) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return changes.RecordKey{}, fmt.Errorf("key %q is not under %q", key, prefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 6 {
		return changes.RecordKey{}, fmt.Errorf("key %q: want 6 segments after the prefix", key)
	}
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return changes.RecordKey{}, fmt.Errorf("key %q: %w", key, err)
		}
		parts[i] = u
	}
	return changes.RecordKey{Cluster: parts[0], Group: parts[1], Resource: parts[2], Namespace: parts[3], Name: parts[4], ResourceVersion: parts[5]}, nil
}

// wireRecord is a changes.Record as stored in etcd (the key holds changes.Record.Key).
type wireRecord struct {
	Kind     changes.RecordKind `json:"k"`
	UID      string             `json:"u,omitempty"`
	BaseRV   string             `json:"b,omitempty"`
	Changes  []objdiff.Change   `json:"c,omitempty"`
	Snapshot json.RawMessage    `json:"s,omitempty"`
	Final    bool               `json:"f,omitempty"`
	Time     int64              `json:"t"` // Unix nanoseconds
}

// Value formats: the first byte says how the rest is encoded.
const (
	valuePlain    = 'j' // JSON
	valueDeflated = 'z' // raw DEFLATE of the JSON
)

// compressAbove: shorter values are stored plain (DEFLATE would not pay for its header).
const compressAbove = 512

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(io.Discard, flate.BestSpeed) // the level is valid
	return w
}}

// encodeRecord encodes rec's value.
func encodeRecord(rec *changes.Record) ([]byte, error) {
	wr := wireRecord{Kind: rec.Kind, UID: rec.UID, BaseRV: rec.BaseRV, Changes: rec.Changes, Final: rec.Final, Time: rec.Time.UnixNano()}
	if len(rec.Snapshot) > 0 {
		wr.Snapshot = rec.Snapshot
	}
	var buf bytes.Buffer
	buf.WriteByte(valuePlain)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&wr); err != nil {
		return nil, fmt.Errorf("encode record %v: %w", rec.Key, err)
	}
	plain := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(plain) <= compressAbove {
		return plain, nil
	}
	var out bytes.Buffer
	out.Grow(len(plain) / 3)
	out.WriteByte(valueDeflated)
	fw := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(fw)
	fw.Reset(&out)
	if _, err := fw.Write(plain[1:]); err != nil {
		return nil, fmt.Errorf("compress record %v: %w", rec.Key, err)
	}
	if err := fw.Close(); err != nil {
		return nil, fmt.Errorf("compress record %v: %w", rec.Key, err)
	}
	if out.Len() >= len(plain) {
		return plain, nil
	}
	return out.Bytes(), nil
}

// maxDecodedValue bounds a decompressed value (a corrupt or hostile value must not exhaust
// memory).
const maxDecodedValue = 64 << 20

// decodeRecord decodes a value written by encodeRecord for key.
func decodeRecord(key changes.RecordKey, val []byte) (changes.Record, error) {
	if len(val) == 0 {
		return changes.Record{}, errors.New("empty value")
	}
	body := val[1:]
	switch val[0] {
	case valuePlain:
	case valueDeflated:
		r := flate.NewReader(bytes.NewReader(body))
		b, err := io.ReadAll(io.LimitReader(r, maxDecodedValue+1))
		r.Close()
		if err != nil {
			return changes.Record{}, fmt.Errorf("decompress: %w", err)
		}
		if len(b) > maxDecodedValue {
			return changes.Record{}, errors.New("decompressed value too large")
		}
		body = b
	default:
		return changes.Record{}, fmt.Errorf("unknown value format %q", val[0])
	}
	var wr wireRecord
	if err := json.Unmarshal(body, &wr); err != nil {
		return changes.Record{}, fmt.Errorf("decode: %w", err)
	}
	if wr.Kind < changes.KindChange || wr.Kind > changes.KindDeletion {
		return changes.Record{}, fmt.Errorf("unknown record kind %d", wr.Kind)
	}
	rec := changes.Record{Key: key, Kind: wr.Kind, UID: wr.UID, BaseRV: wr.BaseRV, Changes: wr.Changes, Final: wr.Final, Time: time.Unix(0, wr.Time)}
	if len(wr.Snapshot) > 0 {
		rec.Snapshot = []byte(wr.Snapshot)
	}
	return rec, nil
}

// mirror keeps the local cache in step with the prefix: load, then watch from the loaded
// revision; after any failure, load again (with backoff).
func (e *Store) mirror(ctx context.Context, cli *clientv3.Client) {
	for attempt := 0; ctx.Err() == nil; {
		rev, err := e.load(ctx, cli)
		if err == nil {
			e.readyMu.Do(func() { close(e.ready) })
			var watched bool
			watched, err = e.watch(ctx, cli, rev)
			if watched {
				attempt = 0
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			op := etcdOpWatch
			if rev == 0 {
				op = etcdOpLoad
			}
			e.fail(op, err)
		}
		if !retry.Sleep(ctx, attempt) {
			return
		}
		attempt++
	}
}

// loadPage is the page size of the load.
const loadPage = 500

// load reads every record under the prefix into the local cache, page by page at one revision,
// and returns that revision.
func (e *Store) load(ctx context.Context, cli *clientv3.Client) (int64, error) {
	var rev int64
	key, end := e.cfg.Prefix, clientv3.GetPrefixRangeEnd(e.cfg.Prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		gctx, cancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
		resp, err := cli.Get(gctx, key, opts...)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("load %s: %w", e.cfg.Prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			e.apply(string(kv.Key), kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch applies the changes under the prefix after rev until the watch fails or ctx ends. It
// reports whether any response arrived (the first is the watch's creation).
//
// While etcd is unreachable the client keeps the watch and resumes it when etcd is back (or
// fails it with a compaction error, and the mirror loads again); meanwhile nothing arrives, so
// a probe (a serializable count of one key, every 2 × RequestTimeout, at least 1s) counts and
// logs the outage.
func (e *Store) watch(ctx context.Context, cli *clientv3.Client, rev int64) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	got := false
	probe := time.NewTicker(max(2*e.cfg.RequestTimeout, time.Second))
	defer probe.Stop()
	// The created notification tells an established watch (which resets the mirror's backoff)
	// from one that fails at once, also when no record is written for a while.
	wch := cli.Watch(wctx, e.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case <-probe.C:
			pctx, pcancel := context.WithTimeout(ctx, e.cfg.RequestTimeout)
			_, err := cli.Get(pctx, e.cfg.Prefix, clientv3.WithSerializable(), clientv3.WithCountOnly())
			pcancel()
			if err != nil && ctx.Err() == nil {
				e.fail(etcdOpWatch, fmt.Errorf("probe: %w", err))
			}
			continue
		case resp, ok = <-wch:
		}
		if !ok {
			break
		}
		if err := resp.Err(); err != nil {
			return got, fmt.Errorf("watch %s: %w", e.cfg.Prefix, err)
		}
		got = true
		for _, ev := range resp.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				e.apply(string(ev.Kv.Key), ev.Kv.Value)
			case clientv3.EventTypeDelete:
				if k, err := parseEtcdKey(e.cfg.Prefix, string(ev.Kv.Key)); err == nil && e.local.Delete(k) {
					e.count(etcdRemoved, 1)
				}
			}
		}
	}
	if ctx.Err() != nil {
		return got, nil
	}
	return got, fmt.Errorf("watch %s: closed", e.cfg.Prefix)
}

// apply puts one stored record into the local cache, unless it holds it already (the leader's
// own writes).
func (e *Store) apply(key string, val []byte) {
	k, err := parseEtcdKey(e.cfg.Prefix, key)
	var rec changes.Record
	if err == nil {
		rec, err = decodeRecord(k, val)
	}
	if err != nil {
		e.fail(etcdOpDecode, err)
		return
	}
	if old, ok := e.local.Get(k); ok && old.Kind == rec.Kind && old.Final == rec.Final && old.Time.Equal(rec.Time) {
		return
	}
	e.local.Put(rec)
	e.count(etcdMirrored, 1)
}
