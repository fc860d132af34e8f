package pebble

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/kelemetry/kelemetry/aggregator"
	"github.com/kelemetry/kelemetry/internal/changefeed"
	"github.com/kelemetry/kelemetry/internal/clockcache"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/internal/loop"
	"github.com/kelemetry/kelemetry/internal/parallel"
	"github.com/kelemetry/kelemetry/store/internal/query"
	"github.com/kelemetry/kelemetry/telemetry"
)

// Store is the embedded store.Store, a Pebble database under Config.Dir.
//
// Durability: every Export is atomic and is written to the write-ahead log without an fsync
// (pebble.NoSync). Export returns once its spans are pending (see pendingSpans): they are
// committed, with the spans of the Exports around them, within pendingDelay, and before any read,
// Sync, retention delete or Stop; Pebble writes the log in the background. So a process crash
// (kill -9) or a power loss may lose the most recent Exports. Sync commits the pending spans and
// writes and syncs the log up to now; the durable audit queue calls it before it marks events
// handled, so that they are replayed if their spans did not reach the disk. Stop flushes the
// memtable to disk and syncs.
//
// Start runs the retention loop, which deletes whole windows older than MaxAge and, while the
// database is larger than MaxBytes, windows dated after the current one, then the oldest
// windows; it runs once per CheckInterval, and sooner when the disk is nearly full.
type Store struct {
	cfg    Config
	window time.Duration
	logger *slog.Logger
	db     *pebble.DB
	feed   *changefeed.Feed
	// deletedUpTo and deletedFuture say which windows retention may have deleted, for the change
	// feed (see prefixChange): every window up to deletedUpTo (the newest deleted by age or
	// size, or one before the oldest found at open), and the future windows deleted (guarded by
	// mu).
	deletedUpTo   atomic.Int64
	deletedFuture map[int64]bool
	// segFrom is the first window whose span keys have segments (segments.go).
	segFrom atomic.Int64
	// traceIdxTo is the first window without trace index entries (traceindex.go).
	traceIdxTo atomic.Int64
	// index remembers the traces whose index entries were written, with the refHash of the
	// object reference written and the segments recorded (indexValue): 8 bytes where the
	// reference's seven strings took about 200 and
	// kept the span's strings alive (about 480 bytes an entry in all against 160: 48 MB against
	// 16 MB at the default IndexCacheSize). Entries and index hold no pointers (clockcache), so
	// the garbage collector does not scan them.
	index  *clockcache.Cache[indexKey, uint64]
	bufs   sync.Pool
	now    func() time.Time
	failed atomic.Pointer[string] // set when Pebble reports a fatal error

	// The disk guard (see disk.go).
	baseFS      vfs.FS                    // the filesystem under Pebble's wrappers
	fs          vfs.FS                    // what Pebble uses: health checks over guardFS over baseFS
	memSize     uint64                    // Pebble's MemTableSize, chosen for MaxBytes
	fault       atomic.Pointer[diskFault] // a failed write since the database was opened
	wedged      atomic.Pointer[string]    // Pebble's commit path panicked: never write again
	stallSince  atomic.Int64              // Unix nanoseconds of the running write stall's start
	lastBgLog   atomic.Int64              // Unix nanoseconds of the last logged background error
	spaceAt     atomic.Int64              // Unix nanoseconds of the last free-space check that found room
	spaceBudget atomic.Int64              // bytes the store may write before checking again
	wake        chan struct{}             // asks the retention loop for a check now (low disk space)
	stuckOver   atomic.Bool               // the last size check could not get under MaxBytes

	// mu is held shared by writes and reads, exclusively by retention deletes, reopening and
	// close.
	mu       sync.RWMutex
	closed   bool
	readOnly string // why the database is open read-only; empty when writable

	loopMu    sync.Mutex
	retention *loop.Group // the retention loop; nil when it does not run
	fsCloser  io.Closer   // stops the disk health checks of the database's filesystem

	pending pendingSpans // spans Export accepted and did not commit yet

	written        *instrument.FixedCounter
	writeErrors    metric.Int64Counter
	deletedWindows metric.Int64Counter
	deletedSpans   metric.Int64Counter
	overLimit      metric.Int64Counter
	indexEvictions metric.Int64Counter // traces evicted from index (set once, before any write)
	sizeReg        metric.Registration
	byAge, bySize  metric.MeasurementOption
}

// indexKey names the index entries of one trace; they are written once per process.
type indexKey struct {
	tid    trace.TraceID
	window int64
}

type pendingRef struct {
	key indexKey
	ref uint64 // indexValue of the entries written
}

// indexValue is an index cache entry: the refHash of the object reference written, its low bits
// the segments whose entries this process wrote.
func indexValue(refHash uint64, segs uint8) uint64 { return refHash&^allSegments | uint64(segs) }

// sameRef reports whether two index values name the same object reference.
func sameRef(a, b uint64) bool { return a&^allSegments == b&^allSegments }

// refSeed keys refHash: random per process.
var refSeed = maphash.MakeSeed()

// refHash identifies an object reference in the index cache (a collision, 2^-64 for a
// changed reference, would leave the trace's older reference in the object index).
func refHash(r *aggregator.ObjectRef) uint64 {
	var h maphash.Hash
	h.SetSeed(refSeed)
	for _, s := range [...]string{r.Cluster, r.Group, r.Version, r.Resource, r.Namespace, r.Name, r.UID} {
		_, _ = h.WriteString(s)
		_ = h.WriteByte(0)
	}
	return h.Sum64()
}

// encoder holds the scratch buffers of one Export call.
type encoder struct {
	key, val, obj []byte
	pend          []pendingRef
}

// Retention reasons, the value of the "reason" attribute of the retention counters.
const (
	reasonAge  = "age"
	reasonSize = "size"
)

var versionKey = []byte("mversion")

// schemaVersion is the store's layout: "4" since windows have no trace index entries
// (traceindex.go), "3" since span keys have segments (segments.go), "2" since spans are written
// in encoding version 2. A store of an earlier version (written by an earlier Kelemetry) is read
// as it is and marked "4" once opened writable, its windows from then on in the current layout;
// an earlier Kelemetry refuses a store marked "4" rather than misread it.
const (
	schemaVersion   = "4"
	schemaVersionV3 = "3"
	schemaVersionV2 = "2"
	schemaVersionV1 = "1"
)

// diskSlowThreshold is how long a filesystem operation may take before it is logged as slow
// (Pebble's default).
const diskSlowThreshold = 5 * time.Second

const meterName = "github.com/kelemetry/kelemetry/store"

// Open opens or creates the database in cfg.Dir for traces of window length w. Call Start
// to run retention and Stop when done.
func Open(ctx context.Context, cfg Config, w aggregator.Window, tel telemetry.Settings) (*Store, error) {
	return openPebble(ctx, cfg, w, tel, vfs.Default)
}

// openPebble is Open on the filesystem base (tests inject faults with it).
func openPebble(ctx context.Context, cfg Config, w aggregator.Window, tel telemetry.Settings, base vfs.FS) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	explicitMaxBytes := cfg.MaxBytes != 0
	cfg = cfg.withDefaults()
	p := &Store{cfg: cfg, window: w.Length(), logger: tel.Log().With("store", cfg.Dir), now: time.Now, wake: make(chan struct{}, 1)}
	// The earlier layouts until the store says (initLayout).
	p.segFrom.Store(math.MaxInt64)
	p.traceIdxTo.Store(math.MaxInt64)
	p.feed = changefeed.NewFeed(p.findChanges)
	p.bufs.New = func() any { return &encoder{} }
	index, err := clockcache.New(max(cfg.IndexCacheSize, 1), func(indexKey, uint64) {
		if c := p.indexEvictions; c != nil {
			c.Add(context.Background(), 1)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("open store: index cache: %w", err)
	}
	p.index = index
	if err := p.initMetrics(tel); err != nil {
		return nil, fmt.Errorf("open store: metrics: %w", err)
	}

	p.baseFS = base
	if err := p.fitVolume(explicitMaxBytes); err != nil {
		_ = p.sizeReg.Unregister()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	p.memSize = memTableSize(p.cfg.MaxBytes)
	// The disk-health-checking filesystem Pebble would create itself runs a goroutine that a
	// failed Open never stops: create it here, and close it after the database (or the failure).
	fs, fsCloser := vfs.WithDiskHealthChecks(&guardFS{FS: base, onErr: p.noteFault}, diskSlowThreshold, nil, func(info vfs.DiskSlowInfo) {
		p.logger.Warn("slow disk operation", "component", "pebble", "info", info.String())
	})
	p.fs, p.fsCloser = fs, fsCloser
	if err := p.openDB(ctx); err != nil {
		_ = p.sizeReg.Unregister()
		_ = fsCloser.Close()
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open store %s: the folder is locked: is another Kelemetry process using it? (%w)", cfg.Dir, err)
		}
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	if err := p.checkVersion(); err != nil {
		_ = p.sizeReg.Unregister()
		_ = p.db.Close()
		_ = fsCloser.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	if err := p.initDeletedUpTo(); err != nil {
		_ = p.sizeReg.Unregister()
		_ = p.db.Close()
		_ = fsCloser.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	return p, nil
}

// maxOpenFiles is Pebble's MaxOpenFiles: its file cache holds up to 54 tables and blob files
// (Pebble counts 10 for its logs and manifest). A steady ingest of 2,000 events/s opens that many
// within its first five minutes, so the store's open files stay flat from then on (with 128 they
// climbed from 88 to 117 between the tenth and the thirtieth minute); a file opened again costs a
// read of its footer and index, most likely in the block cache, and BenchmarkTreeTraceRead and
// BenchmarkGrowingWindow's reads took as long with 54 as with 118.
const maxOpenFiles = 64

// l0FileThreshold is Pebble's L0CompactionFileThreshold. Keys written in time order (the change
// feed, the window index, span keys of past segments and windows) do not overlap from one flush
// to the next, so they add no sublevel to L0 and set off no compaction by L0CompactionThreshold:
// with Pebble's default of 500 files, L0 kept hundreds of them until a burst of overlapping writes
// set off one compaction of them all. A store filled over a day (internal/tools/curves) was left
// with 100-360 files in L0, and a burst of 30,000 events into it then cost 40-69% more CPU than
// into an empty store, one compaction of 47 MB taking a second of it; with 64 files, 2-5% more.
// The same bytes move down either way, a few flushes at a time rather than all at once. Under a
// steady ingest (scripts/soak.sh -r 2000, both builds side by side in one window) the files
// kept open stayed at 34-35 with 64 and rose from 34 to 60 with 500 as L0 filled, and the CPU
// per event was the same.
const l0FileThreshold = 64

// options are the Pebble options of the database, sized for MaxBytes. Open takes its own
// reference to cache: unref it after Open.
func (p *Store) options(readOnly bool, cache *pebble.Cache) *pebble.Options {
	o := &pebble.Options{
		FS:                 p.fs,
		Cache:              cache,
		FormatMajorVersion: pebble.FormatNewest,
		ReadOnly:           readOnly,
		// Spans are written once and read rarely: a larger memtable (up to 16 MiB; the default
		// is 4 MiB) flushes less often, which roughly halves the compaction work under a steady
		// ingest. Pebble keeps two of them resident (the one written and one kept for reuse),
		// allocated outside the Go heap and reserved in the block cache: 32 MiB memtables held
		// 64 MiB of the process's RSS. The write-ahead logs and the write reserve grow with it,
		// so it shrinks with MaxBytes.
		MemTableSize:                p.memSize,
		MemTableStopWritesThreshold: 3,
		// Span keys start with their window and segment, then the trace ID: every flushed file
		// overlaps the current segment (segments.go), so each compaction out of L0 rewrites the
		// segment's data in the level below. Compacting once 8 files (sublevels) are in L0
		// instead of 4 does that half as often: 10-25% more distinct events per CPU-second under
		// bench.sh's load (the compactions left after the drain counted), for up to 8 files a
		// read may consult in L0.
		L0CompactionThreshold: 8,
		// See l0FileThreshold.
		L0CompactionFileThreshold: l0FileThreshold,
		L0StopWritesThreshold:     24,
		Logger:                    pebbleLogger{logger: p.logger, failed: &p.failed},
		EventListener: &pebble.EventListener{
			WriteStallBegin: func(pebble.WriteStallBeginInfo) { p.stallSince.CompareAndSwap(0, time.Now().UnixNano()) },
			WriteStallEnd:   func() { p.stallSince.Store(0) },
			BackgroundError: p.backgroundError,
		},
	}
	// A flush writes one table and one blob file rather than one of each every 2 MiB or so: files
	// of at least two memtables in L0 and Lbase (the levels below double as usual; a blob file
	// is cut with its table). With Pebble's 2 and 4 MiB, a window of 1.5 million spans
	// (BenchmarkGrowingWindow) left 413 blob files and 281 tables, 682 bytes per span on disk
	// and 237 files open; with these 129, 60, 535 bytes and 158.
	o.TargetFileSizes[0] = max(2<<20, 2*int64(p.memSize))
	// Pebble keeps every table and blob file it has opened (for a compaction, for its statistics,
	// for a read) open until the file is deleted or its file cache of MaxOpenFiles (default 1,000)
	// is full, so the store's open files grew with the data it held: under a steady ingest of
	// 2,000 events/s, from 146 in the tenth minute to 267 in the thirtieth. maxOpenFiles bounds
	// them.
	o.MaxOpenFiles = maxOpenFiles
	o.Experimental.SpanPolicyFunc = p.tableBounds
	o.TargetFileSizes[1] = max(4<<20, 2*int64(p.memSize))
	// Pebble's fastest compression (MinLZ on amd64, Snappy on arm64, where MinLZ has no assembly)
	// rather than Snappy everywhere: on amd64, BenchmarkGrowingWindow (a million spans, two runs
	// each) took 16% less CPU per span and the store 13% fewer bytes on disk.
	for i := range o.Levels {
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.FastestCompression }
	}
	// Span values (most of them 300 B to several KB) go to blob files, written once at the
	// memtable's flush; the tables keep the keys and a reference to each value. Before segments
	// (segments.go) a span key started with its window and then the trace ID, so the keys of a
	// steady ingest landed all over the current window, and every compaction out of L0 rewrote
	// the window's tables below it: with
	// the values inside them, those compactions grew to a third of the process's CPU within
	// minutes and kept growing as the window filled (the all-in-one at 2,000 distinct events/s:
	// 11.2 CPU-seconds in the first minute, 19.6 in the sixth). With the values in blob files they
	// rewrite keys and references only: 9-11 CPU-seconds in each of the 6 minutes, 1.5 times
	// fewer in all (CHANGELOG.md). A compaction whose output would
	// refer to more than 256 blob files copies its values into new ones instead (so a read
	// visits at most that many); a window's blob files go when retention deletes its spans. A
	// segment's tables refer to the blob files of the flushes of a sixth of the window (one flush
	// per 12,000 events or so: 55 at 2,000 events/s, 160 at 6,000), so that copy is for ingests
	// above some 10,000 events/s, of one segment's values, and for late writes. With
	// object and link spans in segment 0 (until 2026-12, segments.go), whose tables referred to a
	// blob file of every flush of the window, it copied all of segment 0's values once a window
	// at 2,000 events/s, more often above.
	// Values are never overwritten in place (a span is written once, a duplicate rarely), so
	// blob files are never rewritten to reclaim garbage.
	o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 256, MaxBlobReferenceDepth: 256, RewriteMinimumAge: time.Hour, TargetGarbageRatio: 1}
	}
	return o
}

// backgroundError logs a failed flush or compaction, at most once per 10 seconds (Pebble
// retries them).
func (p *Store) backgroundError(err error) {
	now := time.Now().UnixNano()
	last := p.lastBgLog.Load()
	if now-last < int64(10*time.Second) || !p.lastBgLog.CompareAndSwap(last, now) {
		return
	}
	p.logger.Error("store background flush or compaction failed (retried)", "component", "pebble", "error", err)
}

func (p *Store) checkVersion() error {
	v, closer, err := p.db.Get(versionKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound) && p.readOnly != "":
		return p.initLayout(true, false, false) // written once writable
	case errors.Is(err, pebble.ErrNotFound):
		if err := p.initLayout(true, false, false); err != nil {
			return err
		}
		if err := p.db.Set(versionKey, []byte(schemaVersion), pebble.Sync); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	}
	got := string(v)
	_ = closer.Close()
	older := got == schemaVersionV1 || got == schemaVersionV2 || got == schemaVersionV3
	switch {
	case got == schemaVersion:
		return p.initLayout(false, true, true)
	case older && p.readOnly != "":
		return p.initLayout(false, got == schemaVersionV3, false) // read as it is; marked once writable
	case older:
		// The first windows of the new layouts are recorded before the version: a crash between
		// them leaves a store of the old version that knows them.
		if err := p.initLayout(false, got == schemaVersionV3, false); err != nil {
			return err
		}
		if err := p.db.Set(versionKey, []byte(schemaVersion), pebble.Sync); err != nil {
			return fmt.Errorf("upgrade schema version %s to %s: %w", got, schemaVersion, err)
		}
		p.logger.Info("store upgraded: the windows from segmentsFrom on group span keys by segment, those from traceIndexTo on have no trace index entries; an earlier Kelemetry cannot open it any more",
			"from", got, "to", schemaVersion, "segmentsFrom", time.Unix(0, p.segFrom.Load()).UTC(),
			"traceIndexTo", time.Unix(0, p.traceIdxTo.Load()).UTC())
		return nil
	default:
		return fmt.Errorf("schema version %q, want %q (or %q, %q, %q)", got, schemaVersion, schemaVersionV3, schemaVersionV2, schemaVersionV1)
	}
}

// initLayout reads or sets the first windows of the layouts of schema versions 3 (segments,
// segments.go) and 4 (no trace index entries, traceindex.go): a new store (fresh) has them in
// every window, an older one from the window after the newest it holds. segMarked and tidxMarked
// say the store's version has them recorded.
func (p *Store) initLayout(fresh, segMarked, tidxMarked bool) error {
	if err := p.initFromWindow(&p.segFrom, segFromKey, "segments", fresh, segMarked); err != nil {
		return err
	}
	return p.initFromWindow(&p.traceIdxTo, traceIndexToKey, "trace index", fresh, tidxMarked)
}

func (p *Store) initMetrics(tel telemetry.Settings) error {
	m := instrument.NewMeter(tel, meterName)
	p.written = m.FixedCounter("kelemetry.store.spans.written", "Spans written to the store.", "{span}")
	p.writeErrors = m.Counter("kelemetry.store.write.errors", "Failed store writes (one per failed commit of spans, which may hold the spans of several Export calls).", "{error}", *attribute.EmptySet())
	reasons := instrument.Sets("reason", reasonAge, reasonSize)
	p.deletedWindows = m.Counter("kelemetry.store.retention.deleted.windows", "Windows deleted by retention, by reason (age, size).", "{window}", reasons...)
	p.deletedSpans = m.Counter("kelemetry.store.retention.deleted.spans", "Spans deleted by retention, by reason (age, size).", "{span}", reasons...)
	p.overLimit = m.Counter("kelemetry.store.retention.over_limit", "Retention checks that could not bring the store under maxBytes.", "{check}", *attribute.EmptySet())
	p.indexEvictions = m.Counter("kelemetry.store.indexcache.evictions", "Traces evicted from the cache of traces whose index entries were written (the next span of such a trace looks its entry up in the store).", "{trace}", *attribute.EmptySet())
	p.byAge = metric.WithAttributeSet(reasons[0])
	p.bySize = metric.WithAttributeSet(reasons[1])
	p.sizeReg = m.Gauge("kelemetry.store.size", "Disk space used by the store: every file in its folder, as du counts it.", "By", func() (int64, bool) {
		p.mu.RLock()
		closed := p.closed
		p.mu.RUnlock()
		if closed {
			return 0, false
		}
		n, err := dirUsage(p.cfg.Dir)
		return int64(min(n, math.MaxInt64)), err == nil
	})
	return m.Err()
}

// usable reports why the store cannot be used; call with mu held.
func (p *Store) usable() error {
	if p.closed {
		return query.ErrClosed
	}
	if msg := p.failed.Load(); msg != nil {
		return fmt.Errorf("pebble failed: %s", *msg)
	}
	if p.db == nil {
		return fmt.Errorf("%w: the database could not be reopened after a disk fault", query.ErrUnavailable)
	}
	return nil
}

// Export stores spans, replacing stored spans with the same trace and span ID. The spans of one
// call are committed in one batch (with those of other calls): all or none. It returns once they
// are pending; a failure to commit the pending spans is returned by the Export (or Sync) that
// needed their room, and leaves them pending.
func (p *Store) Export(ctx context.Context, spans []*aggregator.Span) error {
	if len(spans) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store %d spans: %w", len(spans), err)
	}
	// A nil span would fail the commit of the spans around it (for good): refused here.
	if slices.Contains(spans, nil) {
		return fmt.Errorf("store %d spans: a nil span", len(spans))
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.writable(false); err != nil {
		return fmt.Errorf("store %d spans: %w", len(spans), err)
	}
	pd := &p.pending
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if len(pd.spans)+len(spans) > maxPendingSpans {
		if err := p.commitPending(); err != nil {
			return fmt.Errorf("store %d spans: commit the %d spans before them: %w", len(spans), len(pd.spans), err)
		}
		if len(spans) > maxPendingSpans { // committed on its own, now
			if err := p.commit(spans); err != nil {
				return fmt.Errorf("store %d spans: %w", len(spans), err)
			}
			return nil
		}
	}
	if len(pd.spans) == 0 {
		delay := cmp.Or(pd.delay, pendingDelay)
		if pd.timer == nil {
			pd.timer = time.AfterFunc(delay, p.commitPendingLater)
		} else {
			pd.timer.Reset(delay)
		}
	}
	pd.spans = append(pd.spans, spans...)
	return nil
}

// Most Exports carry the one or two spans of one audit event, and a Pebble commit of one span
// costs about as much as encoding it (the commit queue, the log writer's wake-up, the memtable's
// publication). So Export leaves its spans pending, and they are committed together: when the
// next Export would take them past maxPendingSpans, pendingDelay after the first of them, and
// before every read, Sync, retention delete and Stop. (The all-in-one, bulk fixture: about 5%
// less CPU per event.)
const (
	maxPendingSpans   = 64
	pendingDelay      = 10 * time.Millisecond
	pendingRetryDelay = time.Second
)

// pendingSpans are the spans Export accepted and did not commit yet. Lock order: Pebble.mu, then
// mu.
type pendingSpans struct {
	mu    sync.Mutex
	spans []*aggregator.Span
	timer *time.Timer   // commits them pendingDelay after the first one; nil until first needed
	delay time.Duration // pendingDelay when zero (tests set it)
	// failed is why the last commit of the pending spans failed, until one succeeds: Health
	// reports it.
	failed error
}

// commitPending commits the pending spans in one batch; on an error they stay pending. Call with
// p.mu (shared or not) and p.pending.mu held.
func (p *Store) commitPending() error {
	pd := &p.pending
	if len(pd.spans) == 0 {
		pd.failed = nil
		return nil
	}
	if err := p.commit(pd.spans); err != nil {
		pd.failed = err
		return err
	}
	pd.failed = nil
	clear(pd.spans) // not kept: they may hold large strings
	pd.spans = pd.spans[:0]
	return nil
}

// commit writes spans in one batch; call with p.mu held (shared or not).
func (p *Store) commit(spans []*aggregator.Span) error {
	if err := p.writable(false); err != nil {
		return err
	}
	if err := p.write(spans); err != nil {
		p.writeErrors.Add(context.Background(), 1)
		return err
	}
	p.written.Add(0, int64(len(spans)))
	p.feed.Publish(spans) // never blocks
	return nil
}

// commitPendingNow commits the pending spans; call with p.mu held (shared or not).
func (p *Store) commitPendingNow() error {
	p.pending.mu.Lock()
	defer p.pending.mu.Unlock()
	n := len(p.pending.spans)
	if err := p.commitPending(); err != nil {
		return fmt.Errorf("commit %d pending spans: %w", n, err)
	}
	return nil
}

// commitPendingLater is the pending timer's function. A failed commit is tried again after
// pendingRetryDelay (and by the next Export that needs the room, read or Sync).
func (p *Store) commitPendingLater() {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return
	}
	pd := &p.pending
	pd.mu.Lock()
	defer pd.mu.Unlock()
	if err := p.commitPending(); err != nil {
		p.logger.Debug("store: committing pending spans failed; trying again", "spans", len(pd.spans), "error", err)
		pd.timer.Reset(pendingRetryDelay)
	}
}

// readable is usable, after committing the pending spans so that a read sees every Export that
// returned before it; when that commit fails, the read sees what is stored. Call with mu held.
func (p *Store) readable() error {
	if err := p.usable(); err != nil {
		return err
	}
	if err := p.commitPendingNow(); err != nil {
		p.logger.Debug("store: read without the pending spans", "error", err)
	}
	return nil
}

func (p *Store) write(spans []*aggregator.Span) error {
	enc := p.bufs.Get().(*encoder)
	defer func() {
		enc.pend = enc.pend[:0]
		p.bufs.Put(enc)
	}()
	b := p.db.NewBatch()
	defer b.Close()
	now := p.now().UnixNano()
	for _, sp := range spans {
		w := query.WindowNanos(sp)
		seg := p.segment(sp, w, now)
		enc.key = appendSpanKey(enc.key[:0], w, seg, sp.TraceID, sp.SpanID)
		enc.val = appendSpan(enc.val[:0], sp)
		if err := b.Set(enc.key, enc.val, nil); err != nil {
			return fmt.Errorf("batch span: %w", err)
		}
		if err := p.writeIndex(b, enc, sp, w, seg); err != nil {
			return err
		}
		if err := writeChange(b, enc, sp); err != nil {
			return err
		}
	}
	p.spaceBudget.Add(-int64(b.Len()))
	if err := p.apply(b); err != nil {
		return fmt.Errorf("apply batch: %w", err)
	}
	for _, pr := range enc.pend {
		p.index.Add(pr.key, pr.ref)
	}
	return nil
}

// writeIndex adds the index entries of sp's trace to b unless they were written before. The
// object reference of a window is the one of its latest object span, or of its first span
// until an object span arrives. In a window with segments (seg >= 0) an entry also says that
// the trace has spans in sp's segment.
func (p *Store) writeIndex(b *pebble.Batch, enc *encoder, sp *aggregator.Span, w int64, seg int) error {
	ik := indexKey{tid: sp.TraceID, window: w}
	isObject := sp.Kind == aggregator.KindObject
	var h uint64
	if isObject {
		h = refHash(&sp.Object)
	}
	for i := range enc.pend {
		if enc.pend[i].key == ik {
			return p.updateIndex(b, enc, sp, w, seg, &enc.pend[i], h)
		}
	}
	if v, ok := p.index.Get(ik); ok {
		enc.pend = append(enc.pend, pendingRef{key: ik, ref: v})
		return p.updateIndex(b, enc, sp, w, seg, &enc.pend[len(enc.pend)-1], h)
	}
	if !isObject {
		// Written by an earlier process, or evicted from the cache?
		enc.obj = appendObjectString(enc.obj[:0], &sp.Object)
		enc.key = appendObjectKey(enc.key[:0], enc.obj, w, sp.TraceID)
		v, closer, err := p.db.Get(enc.key)
		switch {
		case err == nil:
			ref, derr := decodeRefValue(v)
			_ = closer.Close()
			if derr == nil {
				// The segments it recorded are not known here: this process records its own.
				enc.pend = append(enc.pend, pendingRef{key: ik, ref: indexValue(refHash(&ref), 0)})
				return p.addSegment(b, enc, sp, w, seg, &enc.pend[len(enc.pend)-1])
			}
			// A corrupt entry is rewritten below.
		case !errors.Is(err, pebble.ErrNotFound):
			return fmt.Errorf("read object index: %w", err)
		}
	}
	if !isObject {
		h = refHash(&sp.Object)
	}
	enc.pend = append(enc.pend, pendingRef{key: ik, ref: indexValue(h, 0)})
	if err := p.setObjectRef(b, enc, sp, w); err != nil {
		return err
	}
	enc.key = appendWindowKey(enc.key[:0], w, sp.TraceID)
	if err := b.Set(enc.key, enc.obj, nil); err != nil {
		return fmt.Errorf("batch window index: %w", err)
	}
	if p.traceIndexed(w, sp.TraceID) {
		enc.key = appendTraceKey(enc.key[:0], sp.TraceID, w)
		if err := b.Set(enc.key, nil, nil); err != nil {
			return fmt.Errorf("batch trace index: %w", err)
		}
	}
	return p.addSegment(b, enc, sp, w, seg, &enc.pend[len(enc.pend)-1])
}

// updateIndex writes what the index entries of a trace written before lack for sp: the object
// reference of an object span (h, its refHash) that differs, and sp's segment.
func (p *Store) updateIndex(b *pebble.Batch, enc *encoder, sp *aggregator.Span, w int64, seg int, pr *pendingRef, h uint64) error {
	if sp.Kind == aggregator.KindObject && !sameRef(pr.ref, h) {
		pr.ref = indexValue(h, uint8(pr.ref&allSegments))
		if err := p.setObjectRef(b, enc, sp, w); err != nil {
			return err
		}
	}
	return p.addSegment(b, enc, sp, w, seg, pr)
}

// addSegment writes the object index's segment entry of sp's trace for segment seg (none for -1)
// unless this process wrote it before. It needs no read: the entry is empty, and the segments
// of a trace are the entries there are.
func (p *Store) addSegment(b *pebble.Batch, enc *encoder, sp *aggregator.Span, w int64, seg int, pr *pendingRef) error {
	if seg < 0 || pr.ref&(1<<seg) != 0 {
		return nil
	}
	pr.ref |= 1 << seg
	enc.obj = appendObjectString(enc.obj[:0], &sp.Object)
	enc.key = append(appendObjectKey(enc.key[:0], enc.obj, w, sp.TraceID), byte(seg))
	if err := b.Set(enc.key, nil, nil); err != nil {
		return fmt.Errorf("batch object index segment: %w", err)
	}
	return nil
}

// setObjectRef writes the 'o' entry of sp's trace; enc.obj holds the object string afterwards.
func (p *Store) setObjectRef(b *pebble.Batch, enc *encoder, sp *aggregator.Span, w int64) error {
	enc.obj = appendObjectString(enc.obj[:0], &sp.Object)
	enc.key = appendObjectKey(enc.key[:0], enc.obj, w, sp.TraceID)
	enc.val = appendRefValue(enc.val[:0], &sp.Object)
	if err := b.Set(enc.key, enc.val, nil); err != nil {
		return fmt.Errorf("batch object index: %w", err)
	}
	return nil
}

// GetTrace implements store.Reader.
func (p *Store) GetTrace(ctx context.Context, id trace.TraceID) ([]*aggregator.Span, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", id, err)
	}
	// The windows the trace index lists, and the one the ID says (traceindex.go).
	var windows []int64
	lower := append([]byte{prefixTrace}, id[:]...)
	err := p.scan(ctx, lower, prefixEnd(lower), func(it *pebble.Iterator) (bool, error) {
		if k := it.Key(); len(k) == traceKeyLen {
			windows = append(windows, readWindow(k[1+traceIDLen:]))
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", id, err)
	}
	if _, win, ok := aggregator.ParseTraceID(id); ok && !p.traceIndexed(win.UnixNano(), id) {
		windows = append(windows, win.UnixNano())
	}
	var spans []*aggregator.Span
	var prefixes [][]byte
	for _, w := range windows {
		prefixes = p.spanPrefixes(prefixes, w, id, 0)
	}
	if err := p.scanSpans(ctx, prefixes, func(sp *aggregator.Span) bool {
		spans = append(spans, sp)
		return true
	}); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", id, err)
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("get trace %s: %w", id, query.ErrNotFound)
	}
	spans = dropRepeats(spans)
	slices.SortFunc(spans, query.SpanLess)
	return spans, nil
}

// GetTraces implements store.Reader. The windows are read in key order, by one iterator or, for a
// large read, by one per part.
func (p *Store) GetTraces(ctx context.Context, ws []query.ObjectWindow) ([][]*aggregator.Span, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("get traces: %w", err)
	}
	out := make([][]*aggregator.Span, len(ws))
	if len(ws) == 0 {
		return out, nil
	}
	// The key prefixes to read: one per window without segments, one per segment of the
	// trace's mask in a window with them. Owner is the window's index in ws.
	keys := make([][]byte, 0, len(ws))
	var owner []int
	keyBytes := make([]byte, 0, len(ws)*(winKeyLen+1))
	var one [][]byte
	for i, w := range ws {
		one = p.spanPrefixes(one[:0], w.Window.UnixNano(), w.TraceID, w.Segments)
		for _, k := range one {
			n := len(keyBytes)
			keyBytes = append(keyBytes, k...)
			keys = append(keys, keyBytes[n:len(keyBytes):len(keyBytes)])
			owner = append(owner, i)
		}
	}
	// The keys are sorted as words (window, then the next 16 bytes, then the last: a window's
	// keys all have one length): comparing words rather than bytes through the index made the
	// sort of 4,000 keys about 3 times faster.
	sorted := make([]sortKey, len(keys))
	for i, k := range keys {
		var last uint8
		if len(k) > winKeyLen {
			last = k[winKeyLen]
		}
		sorted[i] = sortKey{binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[1+windowLen:]), binary.BigEndian.Uint64(k[1+windowLen+8:]), last, i}
	}
	slices.SortFunc(sorted, func(a, b sortKey) int {
		return cmp.Or(cmp.Compare(a.w, b.w), cmp.Compare(a.t1, b.t1), cmp.Compare(a.t2, b.t2), cmp.Compare(a.t3, b.t3))
	})
	order := make([]int, len(keys))
	for n, k := range sorted {
		order[n] = k.i
	}
	// A large read is cut into contiguous runs of keys, one iterator and goroutine each, up to
	// the cores there are: the 1,000-pod Deployment tree reads 4,000 traces at once.
	read := out
	if len(keys) > len(ws) {
		read = make([][]*aggregator.Span, len(keys))
	}
	if err := inParts(order, minReadPart, func(part []int) error { return p.readTraces(ctx, keys, part, read) }); err != nil {
		return nil, err
	}
	if len(keys) > len(ws) {
		// A trace read in several segments: its spans in one list, in order again.
		several := make([]bool, len(ws))
		for k, spans := range read {
			i := owner[k]
			switch {
			case len(spans) == 0:
			case out[i] == nil:
				out[i] = spans
			default:
				several[i] = true
				out[i] = append(out[i], spans...)
			}
		}
		for i, ok := range several {
			if ok {
				out[i] = dropRepeats(out[i])
				slices.SortFunc(out[i], query.SpanLess)
			}
		}
	}
	return out, nil
}

// sortKey is the prefix of a trace's span keys (window; segment and trace ID, or trace ID) as
// words, and its index.
type sortKey struct {
	w, t1, t2 uint64
	t3        uint8
	i         int
}

// inParts calls fn on order, or at once on contiguous parts of it of at least minPart each when
// it is long enough, one goroutine a part up to the cores there are (at most maxReadParts).
func inParts(order []int, minPart int, fn func(part []int) error) error {
	errs := make([]error, maxReadParts)
	parallel.Parts(len(order), minPart, maxReadParts, func(k, lo, hi int) { errs[k] = fn(order[lo:hi]) })
	return errors.Join(errs...)
}

// GetTraces reads in parallel above minReadPart windows per part, in at most maxReadParts.
const (
	minReadPart  = 256
	maxReadParts = 4
)

// readChunkBytes is the size the chunks of the values readTraces copies grow to (from 4 KiB,
// doubling, or twice a trace's values when larger).
const readChunkBytes = 1 << 20

// readTraces reads the traces of keys[i] for i in order (ascending keys) into out[i], with one
// iterator.
func (p *Store) readTraces(ctx context.Context, keys [][]byte, order []int, out [][]*aggregator.Span) error {
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{prefixSpan}, UpperBound: []byte{prefixSpan + 1}})
	if err != nil {
		return fmt.Errorf("get traces: iterate: %w", err)
	}
	defer it.Close()
	// The values of one trace are gathered into one buffer and decoded from one string, into one
	// slice of spans, their attributes and logs into a slab or two: a handful of allocations per
	// trace rather than several per span.
	var prev []byte
	var ends []int
	// The values of a trace are copied once, into vals: a chunk that is never written again
	// below what the traces read so far took, so each trace's spans decode from a string of it
	// (their strings point into it) without a second copy.
	var vals []byte
	positioned := false
	var ar spanArena
	for n, i := range order {
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("get traces: %w", err)
			}
		}
		prefix := keys[i]
		ends = ends[:0]
		base := len(vals)
		// The windows come in key order, and a query mostly reads neighbouring traces: when the
		// iterator, having passed the trace before, already stands at (or past) this trace's
		// first key, it is not sought again (no key lies between the two). A window asked for
		// twice is sought again.
		valid := positioned && it.Valid() && bytes.Compare(it.Key(), prefix) >= 0 && !bytes.Equal(prefix, prev)
		if !valid {
			valid = it.SeekGE(prefix)
		}
		for ; valid && bytes.HasPrefix(it.Key(), prefix); valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("get traces: read %x: %w", it.Key(), err)
			}
			if len(v) > cap(vals)-len(vals) {
				// A new chunk, this trace's values so far moved into it (the old chunk keeps
				// the traces before).
				chunk := make([]byte, len(vals)-base, max(min(2*cap(vals), readChunkBytes), 2*(len(vals)-base+len(v)), 4<<10))
				copy(chunk, vals[base:])
				vals, base = chunk, 0
			}
			vals = append(vals, v...)
			ends = append(ends, len(vals)-base)
		}
		positioned, prev = true, prefix
		if len(ends) == 0 {
			continue
		}
		all := ""
		if len(vals) > base {
			all = unsafe.String(&vals[base], len(vals)-base)
		}
		spans := make([]aggregator.Span, len(ends))
		out[i] = make([]*aggregator.Span, len(ends))
		ar.reset(len(ends))
		links, start := 0, 0
		for _, end := range ends {
			if encodedLink(all[start:end]) {
				links++
			}
			start = end
		}
		ar.setLinks(links)
		start = 0
		for j, end := range ends {
			if err := decodeSpanWith(&spans[j], all[start:end], &ar); err != nil {
				return fmt.Errorf("get traces: trace %x, span %d of %d: %w", prefix, j+1, len(ends), err)
			}
			out[i][j] = &spans[j]
			start = end
		}
		slices.SortFunc(out[i], query.SpanLess)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("get traces: iterate: %w", err)
	}
	return nil
}

// FindObjects implements store.Reader.
func (p *Store) FindObjects(ctx context.Context, q query.ObjectQuery) ([]query.ObjectWindows, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("find objects: %w", err)
	}
	match := query.NewMatcher(q, p.window)
	scan := match
	if len(q.Attributes) > 0 {
		scan.Q.Limit = math.MaxInt // the limit counts objects that pass the event filter
	}
	out, err := p.findObjects(ctx, scan)
	if err != nil {
		return nil, fmt.Errorf("find objects: %w", err)
	}
	if len(q.Attributes) == 0 {
		return out, nil
	}
	kept := out[:0]
	for _, ow := range out {
		if len(kept) >= match.Limit() {
			break
		}
		windows := ow.Windows[:0]
		for _, w := range ow.Windows {
			ok, err := p.windowHasEvent(ctx, w, &match)
			if err != nil {
				return nil, fmt.Errorf("find objects: %w", err)
			}
			if ok {
				windows = append(windows, w)
			}
		}
		if len(windows) > 0 {
			ow.Windows = windows
			kept = append(kept, ow)
		}
	}
	return kept, nil
}

// windowHasEvent reports whether the trace tid of window w holds an event span match accepts.
func (p *Store) windowHasEvent(ctx context.Context, ow query.ObjectWindow, match *query.Matcher) (bool, error) {
	found := false
	err := p.scanSpans(ctx, p.spanPrefixes(nil, ow.Window.UnixNano(), ow.TraceID, ow.Segments), func(sp *aggregator.Span) bool {
		found = match.Event(sp)
		return !found
	})
	return found, err
}

// scanSpans decodes the spans under each of prefixes in turn, passing each to fn until fn
// returns false.
func (p *Store) scanSpans(ctx context.Context, prefixes [][]byte, fn func(*aggregator.Span) bool) error {
	more := true
	for _, lower := range prefixes {
		if !more {
			return nil
		}
		err := p.scan(ctx, lower, prefixEnd(lower), func(it *pebble.Iterator) (bool, error) {
			v, err := it.ValueAndErr()
			if err != nil {
				return false, err
			}
			sp, err := decodeSpan(v)
			if err != nil {
				return false, fmt.Errorf("key %x: %w", it.Key(), err)
			}
			more = fn(sp)
			return more, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// FindTraces implements store.Reader.
func (p *Store) FindTraces(ctx context.Context, q query.TraceQuery) ([]query.TraceRef, error) {
	if err := query.ValidPrefix(q.IDPrefix); err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	match := query.NewMatcher(query.ObjectQuery{From: q.From, To: q.To}, p.window)
	var out []query.TraceRef
	// What the trace index lists, and the traces of the windows from traceIdxTo on whose ID says
	// their window, through the window index (traceindex.go).
	lower := append([]byte{prefixTrace}, q.IDPrefix...)
	err := p.scan(ctx, lower, prefixEnd(lower), func(it *pebble.Iterator) (bool, error) {
		k := it.Key()
		if len(k) != traceKeyLen {
			return true, nil
		}
		w := readWindow(k[1+traceIDLen:])
		if !match.Window(w) {
			return true, nil
		}
		var tid trace.TraceID
		copy(tid[:], k[1:1+traceIDLen])
		out = append(out, query.TraceRef{TraceID: tid, Window: query.UnixTime(w)})
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	from, to := p.traceIdxTo.Load(), int64(math.MaxInt64)
	if match.HasFrom && match.From-match.Length+1 > from {
		from = match.From - match.Length + 1 // the first window that ends after From
	}
	if match.HasTo {
		to = match.To
	}
	err = p.traceWindows(ctx, q.IDPrefix, from, to, func(w int64, tid trace.TraceID) bool {
		if match.Window(w) && !p.traceIndexed(w, tid) {
			out = append(out, query.TraceRef{TraceID: tid, Window: query.UnixTime(w)})
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("find traces: %w", err)
	}
	for i := range out {
		ref, err := p.traceObject(out[i].Window.UnixNano(), out[i].TraceID)
		if err != nil {
			return nil, fmt.Errorf("find traces: %w", err)
		}
		out[i].Object = ref
	}
	slices.SortFunc(out, query.TraceLess)
	return out, nil
}

// traceObject reads the object reference of one trace through the window and object indexes.
func (p *Store) traceObject(w int64, tid trace.TraceID) (aggregator.ObjectRef, error) {
	obj, closer, err := p.db.Get(appendWindowKey(nil, w, tid))
	if err != nil {
		return aggregator.ObjectRef{}, fmt.Errorf("window index of %s: %w", tid, err)
	}
	key := appendObjectKey(nil, obj, w, tid)
	_ = closer.Close()
	v, closer, err := p.db.Get(key)
	if err != nil {
		return aggregator.ObjectRef{}, fmt.Errorf("object index of %s: %w", tid, err)
	}
	defer closer.Close()
	return decodeRefValue(v)
}

// Clusters implements store.Reader. It skips from one cluster to the next in the object index.
func (p *Store) Clusters(ctx context.Context) ([]string, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	lower := []byte{prefixObject}
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	defer it.Close()
	out := []string{}
	var seek []byte
	for valid := it.First(); valid; {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list clusters: %w", err)
		}
		rest := it.Key()[1:]
		i := bytes.IndexByte(rest, '/')
		if i < 0 {
			valid = it.Next()
			continue
		}
		out = append(out, string(rest[:i]))
		seek = append(append(append(seek[:0], prefixObject), rest[:i]...), '/'+1)
		valid = it.SeekGE(seek)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	return out, nil
}

func (p *Store) findObjects(ctx context.Context, match query.Matcher) ([]query.ObjectWindows, error) {
	it, err := p.db.NewIterWithContext(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("iterate: %w", err)
	}
	out, err := findObjectsIn(ctx, it, match, &findScratch{})
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("iterate: %w", cerr)
	}
	return out, err
}

// FindExact implements ExactFinder: the keys are looked up in key order with one iterator per
// part, the parts at once up to the cores there are. One FindObjects each would open (and
// close) an iterator per object: the 1,000-pod Deployment tree looks up 1,000 Pods.
func (p *Store) FindExact(ctx context.Context, keys []aggregator.ObjectKey, from, to time.Time) ([]query.ObjectWindows, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.readable(); err != nil {
		return nil, fmt.Errorf("find objects: %w", err)
	}
	out := make([]query.ObjectWindows, len(keys))
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	// In about the order of the keys in the store, for the iterators' sake.
	slices.SortFunc(order, func(a, b int) int {
		x, y := &keys[a], &keys[b]
		return cmp.Or(strings.Compare(x.Cluster, y.Cluster), strings.Compare(x.Group, y.Group),
			strings.Compare(x.Resource, y.Resource), strings.Compare(x.Namespace, y.Namespace), strings.Compare(x.Name, y.Name))
	})
	find := func(part []int) error {
		it, err := p.db.NewIterWithContext(ctx, nil)
		if err != nil {
			return fmt.Errorf("find objects: iterate: %w", err)
		}
		defer it.Close()
		var sc findScratch
		for n, i := range part {
			if n%64 == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("find objects: %w", err)
				}
			}
			found, err := findObjectsIn(ctx, it, query.NewMatcher(query.Exact(keys[i], from, to), p.window), &sc)
			if err != nil {
				return fmt.Errorf("find objects: %w", err)
			}
			if len(found) > 0 {
				out[i] = found[0]
			}
		}
		return nil
	}
	if err := inParts(order, minFindPart, find); err != nil {
		return nil, err
	}
	return out, nil
}

// minFindPart is the fewest keys FindExact looks up in a part of its own.
const minFindPart = 64

// findScratch holds the buffers of findObjectsIn, kept from one call to the next by FindExact.
type findScratch struct{ lower, upper, cur, lastVal, seekBuf, base []byte }

// findObjectsIn is findObjects with the iterator it, whose bounds it sets, and the buffers of sc.
func findObjectsIn(ctx context.Context, it *pebble.Iterator, match query.Matcher, sc *findScratch) ([]query.ObjectWindows, error) {
	// Narrow the scan to the leading fields the query fixes.
	lower := append(sc.lower[:0], prefixObject)
	for i, f := range [...]string{match.Q.Cluster, match.Q.Group, match.Q.Resource, match.Q.Namespace, match.Q.Name} {
		if f == "" && !match.Q.Exact {
			break
		}
		lower = append(lower, f...)
		if i < 4 {
			lower = append(lower, '/')
		} else {
			lower = append(lower, 0)
		}
	}
	upper := appendPrefixEnd(sc.upper, lower)
	it.SetBounds(lower, upper) // Pebble copies the bounds
	sc.lower = lower
	if upper != nil {
		sc.upper = upper
	}

	var (
		out     []query.ObjectWindows
		cur     = sc.cur // object string of the object being read
		haveCur bool
		windows []query.ObjectWindow
		lastVal = sc.lastVal // index value of its newest matching window
		seekBuf = sc.seekBuf
		base    = sc.base // the key of the entry read last
		steps   int
	)
	defer func() { sc.cur, sc.lastVal, sc.seekBuf, sc.base = cur[:0], lastVal[:0], seekBuf[:0], base[:0] }()
	if match.Q.Exact && match.HasFrom && match.HasTo && match.Length > 0 {
		windows = make([]query.ObjectWindow, 0, min((match.To-match.From)/match.Length+2, 64))
	}
	finish := func() error {
		if len(windows) == 0 {
			return nil
		}
		ref, err := decodeRefValue(lastVal)
		if err != nil {
			return fmt.Errorf("object %s: %w", cur, err)
		}
		out = append(out, query.ObjectWindows{Object: ref, Windows: windows})
		windows = nil
		return nil
	}
	// skip returns the first key after every key of the current object.
	skip := func() []byte {
		seekBuf = append(append(append(seekBuf[:0], prefixObject), cur...), 1)
		return seekBuf
	}
	valid := it.First()
	for valid {
		if steps++; steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		key := it.Key()
		if len(key) < 1+objSuffix || key[len(key)-objSuffix] != 0 {
			valid = it.Next() // not an entry (a segment entry whose entry is gone)
			continue
		}
		obj := key[1 : len(key)-objSuffix]
		if !haveCur || !bytes.Equal(obj, cur) {
			if err := finish(); err != nil {
				return nil, err
			}
			if len(out) >= match.Limit() {
				break
			}
			cur, haveCur = append(cur[:0], obj...), true
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, fmt.Errorf("read %x: %w", key, err)
			}
			ref, err := decodeRefValue(v)
			if err != nil {
				return nil, fmt.Errorf("object %s: %w", cur, err)
			}
			if !match.Object(ref.Key()) {
				// Over the next objects of the fields the query leaves open, not through them: a
				// search by namespace and name reads one key per cluster and group, not one per
				// object stored.
				target, more := skipTo(seekBuf[:0], &match.Q, &ref)
				if !more {
					break
				}
				if target == nil || bytes.Compare(target, key) <= 0 {
					target = skip()
				}
				seekBuf = target
				valid = it.SeekGE(seekBuf)
				continue
			}
			if match.HasFrom {
				// The first window that can end after From.
				seekBuf = appendWindow(append(append(append(seekBuf[:0], prefixObject), cur...), 0), match.From-match.Length+1)
				if bytes.Compare(key, seekBuf) < 0 {
					valid = it.SeekGE(seekBuf)
					continue
				}
			}
		}
		w := readWindow(key[len(key)-objSuffix+1:])
		if match.HasTo && w > match.To {
			valid = it.SeekGE(skip())
			continue
		}
		matched := match.Window(w)
		if matched {
			v, err := it.ValueAndErr()
			if err != nil {
				return nil, fmt.Errorf("read %x: %w", key, err)
			}
			lastVal = append(lastVal[:0], v...)
			var tid trace.TraceID
			copy(tid[:], key[len(key)-traceIDLen:])
			windows = append(windows, query.ObjectWindow{Window: query.UnixTime(w), TraceID: tid})
		}
		// The entry's segment entries follow it: its key and one byte.
		base = append(base[:0], key...)
		valid = it.Next()
		for valid && len(it.Key()) == len(base)+1 && bytes.HasPrefix(it.Key(), base) {
			if matched {
				windows[len(windows)-1].Segments |= 1 << (it.Key()[len(base)] % segments)
			}
			valid = it.Next()
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("iterate: %w", err)
	}
	if len(out) < match.Limit() {
		if err := finish(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// skipTo returns, in dst, the first object key that can match q after the object ref, which does
// not match (a skip scan over the fields q leaves open): where the first field q fixes that ref
// differs in sorts before q's value, the key of that value after ref's earlier fields; where it
// sorts after, the end of ref's earlier fields. more is false when no later key can match. It
// returns nil for an exact query (its bounds fix every field).
func skipTo(dst []byte, q *query.ObjectQuery, ref *aggregator.ObjectRef) (target []byte, more bool) {
	if q.Exact {
		return nil, true
	}
	have := [...]string{ref.Cluster, ref.Group, ref.Resource, ref.Namespace, ref.Name}
	want := [...]string{q.Cluster, q.Group, q.Resource, q.Namespace, q.Name}
	b := append(dst, prefixObject)
	for i := range have {
		sep := byte('/') // as appendObjectString separates the fields; the name ends with 0
		if i == len(have)-1 {
			sep = 0
		}
		if want[i] != "" && have[i] != want[i] {
			if compareField(have[i], want[i], sep) < 0 {
				return append(append(b, want[i]...), sep), true
			}
			if i == 0 {
				return nil, false
			}
			return appendPrefixEnd(nil, b), true
		}
		b = append(append(b, have[i]...), sep)
	}
	return nil, true
}

// compareField compares a+sep with b+sep: the order of two keys that differ first in that field.
func compareField(a, b string, sep byte) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	switch {
	case len(a) == len(b):
		return 0
	case len(a) < len(b):
		return cmp.Compare(sep, b[n])
	default:
		return cmp.Compare(a[n], sep)
	}
}

// scan calls fn for each key in [lower, upper) until fn returns false or an error.
func (p *Store) scan(ctx context.Context, lower, upper []byte, fn func(*pebble.Iterator) (bool, error)) error {
	it, err := p.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("iterate: %w", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		more, err := fn(it)
		if err != nil {
			_ = it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("iterate: %w", err)
	}
	return nil
}

// close stops retention, flushes the memtable and closes the database. Later calls return nil;
// other methods return an error afterwards. On a full or failing disk the memtable is not
// flushed (see disk.go); Stop bounds the time close may take.
func (p *Store) close() error {
	stopErr := p.stopRetention(context.Background())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	var errs []error
	if stopErr != nil {
		errs = append(errs, stopErr)
	}
	if err := p.usable(); err != nil {
		p.pending.mu.Lock()
		if n := len(p.pending.spans); n > 0 {
			errs = append(errs, fmt.Errorf("%d pending spans not committed: %w", n, err))
		}
		p.pending.mu.Unlock()
	} else if err := p.commitPendingNow(); err != nil {
		errs = append(errs, fmt.Errorf("%w (not committed)", err))
	}
	p.closed = true
	p.pending.mu.Lock()
	if p.pending.timer != nil {
		p.pending.timer.Stop()
	}
	p.pending.spans = nil
	p.pending.mu.Unlock()
	if err := p.sizeReg.Unregister(); err != nil {
		errs = append(errs, fmt.Errorf("unregister size gauge: %w", err))
	}
	if err := p.closeDB(true); err != nil {
		errs = append(errs, err)
	}
	if err := p.fsCloser.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close disk health checks: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store %s: %w", p.cfg.Dir, err)
	}
	return nil
}

// pebbleLogger routes Pebble's log to slog. Pebble's informational messages go to Debug. A
// fatal error is logged and makes the store refuse further use instead of exiting the process.
type pebbleLogger struct {
	logger *slog.Logger
	failed *atomic.Pointer[string]
}

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.logger.Enabled(context.Background(), slog.LevelDebug) {
		l.logger.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.logger.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.failed.CompareAndSwap(nil, &msg)
	l.logger.Error(msg, "component", "pebble", "fatal", true)
}

// tableBounds ends every table Pebble writes (at flushes and in compactions) where a kind of key
// ends, and a window's span and window-index keys where the window ends. Without it a flush wrote
// one table holding every kind of key, so each compaction out of L0 took in every table of the
// level below between the change feed's first key and the window index's last: with the current
// window's span keys, it rewrote the change feed's entries (written in time order, so a new
// table of them overlaps none but the newest) and the span keys of earlier windows, again and
// again. BenchmarkGrowingWindow: half the table bytes rewritten in compactions (154-164 bytes per
// span against 318-338, a window of 1.5 million spans), reads of the window as fast.
//
// In a window with segments (segments.go), span tables also end where a segment ends.
func (p *Store) tableBounds(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 {
		return pebble.SpanPolicy{}, nil, nil
	}
	n := 1
	if (start[0] == prefixSpan || start[0] == prefixWindow) && len(start) >= 1+windowLen {
		n = 1 + windowLen
		if start[0] == prefixSpan && len(start) > 1+windowLen && p.segmented(readWindow(start[1:])) {
			n++
		}
	}
	return pebble.SpanPolicy{}, prefixEnd(start[:n]), nil
}
