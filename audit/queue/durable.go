package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/instrument"
)

// durable queue is a Queue whose batches are written to a log on local disk before they are
// accepted: Enqueue returns (and the webhook answers 200) only once the batch is fsync'd.
// Batches enqueued at the same time share one fsync. The events then go to the in-memory
// partitions and the handler as with Queue. A batch counts as done once every one of its events
// was handled; done batches are marked in the log and its files are deleted once everything in
// them is done. After a crash (or a Stop that gave up draining), Start replays the batches that
// were not done, in order, before it accepts new batches (Enqueue answers ErrFull while it
// replays, so the webhook answers 429 and kube-apiserver retries). A batch whose events were
// partly handled is replayed whole: harmless, since event span IDs are deterministic and the
// stores upsert.
//
// The log is bounded (queue.Config.MaxDiskBytes): a batch that does not fit is refused with
// ErrFull and counted (kelemetry.audit.queue.disk_rejected). A batch the in-memory queue
// refuses after it was written is marked done at once, so it is not replayed: its sender retries.
type durableQueue struct {
	mem    *memQueue
	log    *diskLog
	logger *slog.Logger

	replay     []batchLoc
	replaying  atomic.Bool
	replayDone chan struct{}
	replayOnce sync.Once

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc

	// Handled batches wait in acks until the sinks synced (sinkSync), then are marked done.
	sinkSync    func(context.Context) error
	ackMu       sync.Mutex
	acks        []uint64
	ackWake     chan struct{} // capacity 1
	ackStop     chan struct{} // closed by Stop once the in-memory queue drained
	ackStopOnce sync.Once
	ackerDone   chan struct{}
	syncFails   metric.Int64Counter

	diskRejected metric.Int64Counter
	replayed     metric.Int64Counter
	corrupt      metric.Int64Counter
	gauges       []metric.Registration
	unregister   sync.Once
}

// newDurable opens (or creates) the log in cfg.Dir and returns a durable queue that passes
// events to deps.Handle. The batches the log holds that were not handled are replayed by Start. ts gives its
// logger and meter provider (either may be unset).
func newDurable(cfg Config, deps Deps) (*durableQueue, error) {
	h, ts := deps.Handle, deps.Telemetry
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("audit queue: a durable queue needs dir")
	}
	cfg = cfg.WithDefaults()
	mem, err := newMemory(cfg, Deps{Handle: h, Telemetry: ts})
	if err != nil {
		return nil, err
	}
	logger := ts.Log().With("component", "audit.queue", "dir", cfg.Dir)
	l, pending, err := openDiskLog(cfg.Dir, cfg.MaxDiskBytes, min(cfg.SegmentBytes, cfg.MaxDiskBytes), logger)
	if err != nil {
		_ = mem.Stop(context.Background())
		return nil, fmt.Errorf("open audit queue log: %w", err)
	}
	d := &durableQueue{mem: mem, log: l, logger: logger, sinkSync: deps.Sync, replay: pending, replayDone: make(chan struct{}),
		ackWake: make(chan struct{}, 1), ackStop: make(chan struct{}), ackerDone: make(chan struct{})}
	d.replaying.Store(true)
	if len(pending) > 0 {
		logger.Info("audit queue: batches to replay from the log", "batches", len(pending))
	}

	meter := instrument.NewMeter(ts, meterName)
	d.diskRejected = meter.Counter("kelemetry.audit.queue.disk_rejected",
		"Audit events refused because the durable queue's log reached maxDiskBytes; their sender keeps them.", "{event}", *attribute.EmptySet())
	d.replayed = meter.Counter("kelemetry.audit.queue.replayed",
		"Audit events replayed from the durable queue's log at start-up (not handled before a crash or stop).", "{event}", *attribute.EmptySet())
	d.syncFails = meter.Counter("kelemetry.audit.queue.sink_sync_failures",
		"Failed syncs of the sinks before marking durable audit batches done (the batches stay in the log and are retried).", "{sync}", *attribute.EmptySet())
	// The webhook's answer waits for the fsync of its batch: from a fast local disk's sub-millisecond
	// to a shared or network disk's stalls of seconds.
	syncTime := meter.Histogram("kelemetry.audit.queue.fsync.duration",
		"Time each fsync of the durable audit queue's log by accepted batches took (the webhook's answers wait for it; one fsync serves the batches that arrived meanwhile).", "s",
		0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
	l.onSync = func(took time.Duration) { syncTime.Record(context.Background(), took.Seconds()) }
	d.corrupt = meter.Counter("kelemetry.audit.queue.corrupt_records",
		"Records of the durable queue's log skipped because they were torn or did not decode (lost).", "{record}", *attribute.EmptySet())
	if n := l.corruptRecords.Load(); n > 0 {
		d.corrupt.Add(context.Background(), n)
	}
	d.gauges = append(d.gauges,
		meter.Gauge("kelemetry.audit.queue.disk_bytes", "Bytes of the durable audit queue's log files (bounded by maxDiskBytes).", "By",
			func() (int64, bool) { return l.Size(), true }),
		meter.Gauge("kelemetry.audit.queue.max_disk_bytes", "The bound of kelemetry.audit.queue.disk_bytes (audit.queue.maxDiskBytes): the webhook answers 429 when a batch does not fit.", "By",
			func() (int64, bool) { return cfg.MaxDiskBytes, true }),
		meter.Gauge("kelemetry.audit.queue.fsyncs", "fsyncs of the durable audit queue's log by accepted batches (shared by concurrent batches).", "{fsync}",
			func() (int64, bool) { return l.syncs.Load(), true }),
		meter.Gauge("kelemetry.audit.queue.deleted_segments", "Files of the durable audit queue's log deleted once handled.", "{file}",
			func() (int64, bool) { return l.deletedSegs.Load(), true }),
		meter.Gauge("kelemetry.audit.queue.log_failures", "Writes, syncs and probes of the durable audit queue's log that failed (the queue answers 503 until a probe succeeds).", "{failure}",
			func() (int64, bool) { return l.failures.Load(), true }),
		meter.Gauge("kelemetry.audit.queue.log_recoveries", "Probes of a failed durable audit queue log that succeeded (it took batches again).", "{recovery}",
			func() (int64, bool) { return l.recoveries.Load(), true }),
	)
	if err := meter.Err(); err != nil {
		_ = l.Close()
		_ = mem.Stop(context.Background())
		return nil, fmt.Errorf("audit queue: %w", err)
	}
	return d, nil
}

// Direct returns the in-memory queue the durable queue feeds: sources that can read their input
// again themselves after a crash (log replay and follow) enqueue there, without a copy on disk.
func (d *durableQueue) Direct() Target { return d.mem }

// Len returns the number of events accepted and not yet handled (those replayed from the log
// once they were read back).
func (d *durableQueue) Len() int { return d.mem.Len() }

// Bytes returns the estimated memory of the events Len counts.
func (d *durableQueue) Bytes() int64 { return d.mem.Bytes() }

// DiskBytes returns the bytes of the log's files.
func (d *durableQueue) DiskBytes() int64 { return d.log.Size() }

// Health returns nil while the queue takes batches, else an error wrapping ErrUnavailable
// that says why (its log failed a write or sync: a full disk, a quota, EIO). A failed log probes
// a new file here and when a batch comes, at most once a second, and takes batches again once a
// probe is on disk. The webhook asks before reading a body (503 with Retry-After meanwhile), and
// /healthz reports it.
func (d *durableQueue) Health(context.Context) error { return d.log.Health() }

// Flush waits until every event enqueued before the call has been handled.
func (d *durableQueue) Flush(ctx context.Context) error { return d.mem.Flush(ctx) }

// Enqueue writes the batch to the log, waits until it is on disk, and queues its events; all of
// them or none (see Queue.Enqueue). It returns an error wrapping ErrFull while the log is
// full, the in-memory queue is full or the start-up replay is running, and ErrStopped once Stop
// has begun. It blocks only for the disk.
func (d *durableQueue) Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return d.EnqueueReleasing(ctx, cluster, events, nil)
}

// EnqueueReleasing is Enqueue that calls release, when not nil, once every event of the batch
// was handled (bodybuf.ReleasingEnqueuer): the log holds a copy of the batch, the memory stage
// the events.
func (d *durableQueue) EnqueueReleasing(ctx context.Context, cluster string, events []*auditv1.Event, release func()) error {
	if d.replaying.Load() && len(events) > 0 {
		select {
		case <-d.replayDone:
		default:
			d.mem.record(ctx, len(events), ErrFull)
			return fmt.Errorf("%w: replaying the durable queue's log", ErrFull)
		}
	}
	return d.enqueue(ctx, cluster, events, false, release)
}

// EnqueueWait is Enqueue that waits, honouring ctx, for the start-up replay and for room in
// memory instead of refusing the batch. It still refuses a batch the log has no room for.
func (d *durableQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	select {
	case <-d.replayDone:
	case <-ctx.Done():
		return fmt.Errorf("wait for the audit queue's replay: %w", ctx.Err())
	}
	return d.enqueue(ctx, cluster, events, true, nil)
}

// enqueue is Enqueue, or EnqueueWait if wait is set; release, when not nil, is called once every
// event was handled.
func (d *durableQueue) enqueue(ctx context.Context, cluster string, events []*auditv1.Event, wait bool, release func()) error {
	if len(events) == 0 {
		return d.mem.Enqueue(ctx, cluster, nil)
	}
	for i, ev := range events {
		if ev == nil {
			return fmt.Errorf("audit queue: event %d of the batch is nil", i)
		}
	}
	bp := getRecordBuffer(batchSizeHint(events))
	rec := appendBatch(*bp, cluster, events)
	id, seg, end, err := d.log.write(rec)
	// The record was copied to the file: its buffer serves the next batch (the events do not
	// alias it).
	*bp = rec
	putRecordBuffer(bp)
	if err != nil {
		if errors.Is(err, ErrFull) {
			d.diskRejected.Add(ctx, int64(len(events)))
		}
		d.mem.record(ctx, len(events), err)
		return err
	}
	// The events are handled while the record is being synced: a crash before the sync only
	// loses a batch that was not acknowledged (its sender retries it), and a batch handled
	// twice stores nothing twice.
	done := func() { d.handled(id) }
	if release != nil {
		done = func() { d.handled(id); release() }
	}
	tr := newBatchTrack(len(events), done)
	if err := d.mem.enqueueTracked(ctx, cluster, events, tr, wait); err != nil {
		// The sender keeps the batch: do not replay it.
		d.log.Ack(id)
		return err
	}
	if err := d.log.syncTo(seg, end); err != nil {
		return fmt.Errorf("audit queue: %w", err)
	}
	return nil
}

func batchSizeHint(events []*auditv1.Event) int {
	n := 64
	for _, ev := range events {
		n += len(ev.RequestObject) + len(ev.ResponseObject) + 384
	}
	return n
}

// maxPooledRecord bounds the record buffers kept for reuse.
const maxPooledRecord = 8 << 20

var recordBuffers = sync.Pool{New: func() any { return new([]byte) }}

// getRecordBuffer returns a batchBuffer of at least sizeHint bytes of room, reused if possible.
func getRecordBuffer(sizeHint int) *[]byte {
	bp, _ := recordBuffers.Get().(*[]byte)
	if bp == nil || cap(*bp) < recHeader+sizeHint {
		b := batchBuffer(sizeHint)
		return &b
	}
	*bp = (*bp)[:recHeader]
	return bp
}

func putRecordBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledRecord {
		recordBuffers.Put(bp)
	}
}

// Start starts the in-memory queue and replays, in the background, the batches of the log that
// were not handled. It does not block.
func (d *durableQueue) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return fmt.Errorf("start audit queue: %w", ErrStopped)
	}
	if err := d.mem.Start(ctx); err != nil {
		return err
	}
	d.started = true
	runCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go d.replayLog(runCtx)
	go d.acker()
	return nil
}

// ackInterval is how long handled batches gather before one sync of the sinks marks them done.
const ackInterval = 20 * time.Millisecond

// handled is called once every event of batch id was handled.
func (d *durableQueue) handled(id uint64) {
	if d.sinkSync == nil {
		d.log.Ack(id)
		return
	}
	d.ackMu.Lock()
	d.acks = append(d.acks, id)
	d.ackMu.Unlock()
	select {
	case d.ackWake <- struct{}{}:
	default:
	}
}

// acker marks handled batches done in the log after a sync of the sinks, a group at a time,
// until Stop; then it marks what is left.
func (d *durableQueue) acker() {
	defer close(d.ackerDone)
	ctx := context.Background()
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-d.ackWake:
		case <-d.ackStop:
			d.flushAcks(ctx)
			return
		}
		// Let more batches finish: one sync serves them all.
		timer.Reset(ackInterval)
		select {
		case <-timer.C:
		case <-d.ackStop:
			d.flushAcks(ctx)
			return
		}
		if !d.flushAcks(ctx) {
			// The sinks failed to sync: the batches stay pending and are retried.
			timer.Reset(time.Second)
			select {
			case <-timer.C:
			case <-d.ackStop:
				d.flushAcks(ctx)
				return
			}
			select {
			case d.ackWake <- struct{}{}:
			default:
			}
		}
	}
}

// flushAcks syncs the sinks and marks the batches handled so far done. It reports false if the
// sync failed (the batches then stay pending).
func (d *durableQueue) flushAcks(ctx context.Context) bool {
	d.ackMu.Lock()
	ids := d.acks
	d.acks = nil
	d.ackMu.Unlock()
	if len(ids) == 0 {
		return true
	}
	if err := d.sinkSync(ctx); err != nil {
		d.syncFails.Add(ctx, 1)
		d.logger.Warn("audit queue: the sinks did not sync; handled batches stay in the log", "batches", len(ids), "error", err)
		d.ackMu.Lock()
		d.acks = append(ids, d.acks...)
		d.ackMu.Unlock()
		return false
	}
	d.log.Ack(ids...)
	return true
}

func (d *durableQueue) replayLog(ctx context.Context) {
	defer d.endReplay()
	replay := d.replay
	d.replay = nil
	var batches, events int
	for _, loc := range replay {
		if ctx.Err() != nil {
			break
		}
		body, err := readBatch(loc)
		var cluster string
		var evs []*auditv1.Event
		if err == nil {
			cluster, evs, err = decodeBatch(body)
		}
		if err != nil {
			d.corrupt.Add(ctx, 1)
			d.logger.Error("audit queue: a batch of the log cannot be read back; skipped", "batch", loc.id, "error", err)
			d.log.Ack(loc.id)
			continue
		}
		if len(evs) == 0 {
			d.log.Ack(loc.id)
			continue
		}
		id := loc.id
		tr := newBatchTrack(len(evs), func() { d.handled(id) })
		if err := d.mem.enqueueTracked(ctx, cluster, evs, tr, true); err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrStopped) {
				// Stopping: what is left stays in the log for the next start.
				break
			}
			// E.g. a batch larger than a capacity lowered since it was written: it can never be
			// queued, and keeping it would keep the log from being deleted.
			d.corrupt.Add(ctx, 1)
			d.logger.Error("audit queue: a batch of the log cannot be queued; skipped", "batch", loc.id, "events", len(evs), "error", err)
			d.log.Ack(loc.id)
			continue
		}
		d.replayed.Add(ctx, int64(len(evs)))
		batches++
		events += len(evs)
	}
	if batches > 0 {
		d.logger.Info("audit queue: replayed the log's unhandled batches", "batches", batches, "events", events)
	}
}

func (d *durableQueue) endReplay() {
	d.replayOnce.Do(func() {
		d.replaying.Store(false)
		close(d.replayDone)
	})
}

// Stop stops accepting batches, stops the replay, lets the in-memory queue drain (see Queue.Stop),
// and closes the log. Batches not handled stay in the log and are replayed by the next Start. It
// is safe without Start and may be called more than once.
func (d *durableQueue) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stopped = true
	started, cancel := d.started, d.cancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	if started {
		<-d.replayDone
	} else {
		d.endReplay()
	}
	err := d.mem.Stop(ctx)
	if started {
		d.ackStopOnce.Do(func() { close(d.ackStop) })
		<-d.ackerDone
	}
	if cerr := d.log.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close audit queue log: %w", cerr))
	}
	d.unregister.Do(func() {
		for _, g := range d.gauges {
			_ = g.Unregister()
		}
	})
	return err
}
