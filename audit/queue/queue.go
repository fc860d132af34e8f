package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/natsqueue"
)

// defaultCapacity is the default total number of events a Queue holds.
const defaultCapacity = 100_000

// defaultMaxBytes is the default bound on the estimated bytes of the events a Queue holds.
const defaultMaxBytes = 256 << 20

// meterName is the instrumentation scope of the package's metrics.
const meterName = "github.com/kelemetry/kelemetry/audit"

// ErrBatchTooLarge means a batch holds more events than the queue's whole capacity, so it can never
// be accepted, however long the caller waits. Errors that wrap it also wrap ErrFull.
var ErrBatchTooLarge = errors.New("audit batch larger than the queue capacity")

// Config configures the queue New returns. The zero value means defaults (in memory).
type Config struct {
	// Capacity bounds the events accepted and not yet handled, over all partitions (default
	// 100,000). A batch that does not fit is rejected whole.
	Capacity int `yaml:"capacity"`
	// MaxBytes bounds the estimated memory of those events (EventBytes: their request and
	// response bodies plus about 1 KB each, 1.4 KB with a response body; default 256 MiB), so
	// that a stream of large objects cannot fill the heap long before Capacity is reached. A
	// batch that does not fit is rejected whole, like one over Capacity.
	MaxBytes int64 `yaml:"maxBytes"`
	// Partitions is the number of partitions, each drained by one goroutine (default
	// 2*GOMAXPROCS).
	Partitions int `yaml:"partitions"`

	// Durable, unset or true, makes the queue durable when Dir is set (see durable queue): the
	// webhook answers 200 only once a batch is on disk, and batches not yet handled are replayed
	// after a crash. false keeps the queue in memory only. The all-in-one sets Dir from its data
	// folder, so its queue is durable unless this is false.
	Durable *bool `yaml:"durable"`
	// Dir is the folder of the durable queue's log (the all-in-one's default:
	// <dataDir>/audit-queue). Empty: the queue is in memory only.
	Dir string `yaml:"dir"`
	// MaxDiskBytes bounds the durable queue's log on disk (default 1 GiB). A batch that does not
	// fit is refused (the webhook answers 429) and counted.
	MaxDiskBytes int64 `yaml:"maxDiskBytes"`
	// SegmentBytes is the size at which the durable queue starts a new log file (default 16 MiB,
	// at most MaxDiskBytes); a file is deleted once every batch in it, and in the older ones, was
	// handled. The active file is replaced and deleted sooner, from 1 MiB, whenever every batch
	// in it was handled, so handled data does not stay on disk.
	SegmentBytes int64 `yaml:"segmentBytes"`
	// NATS, with urls set, makes the queue a NATS queue on NATS JetStream: the webhook answers 200
	// once JetStream acknowledged the batch's messages, and every replica with this setting
	// publishes and consumes (see NATS queue). It replaces the durable queue: the all-in-one then
	// leaves Dir unset, and setting Dir or Durable true with it is an error. Capacity, MaxBytes
	// and Partitions do not apply (the stream's limits and NATS.Partitions do).
	NATS natsqueue.Config `yaml:"nats"`
}

// IsNATS reports whether the queue is on NATS JetStream: NATS.URLs is set.
func (c Config) IsNATS() bool { return len(c.NATS.URLs) > 0 }

// defaultMaxDiskBytes is the default bound of the durable queue's log on disk.
const defaultMaxDiskBytes = 1 << 30

// defaultSegmentBytes is the default size of a file of the durable queue's log.
const defaultSegmentBytes = 16 << 20

// IsDurable reports whether the queue is durable on local disk: Dir is set, Durable is not false
// and the queue is not on NATS.
func (c Config) IsDurable() bool {
	return c.Dir != "" && (c.Durable == nil || *c.Durable) && !c.IsNATS()
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = defaultCapacity
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.Partitions == 0 {
		c.Partitions = 2 * runtime.GOMAXPROCS(0)
	}
	if c.MaxDiskBytes == 0 {
		c.MaxDiskBytes = defaultMaxDiskBytes
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = min(defaultSegmentBytes, c.MaxDiskBytes)
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Capacity < 0 {
		return fmt.Errorf("audit queue: capacity %d is negative", c.Capacity)
	}
	if c.MaxBytes < 0 {
		return fmt.Errorf("audit queue: maxBytes %d is negative", c.MaxBytes)
	}
	if c.Partitions < 0 {
		return fmt.Errorf("audit queue: partitions %d is negative", c.Partitions)
	}
	if c.MaxDiskBytes < 0 || c.SegmentBytes < 0 {
		return fmt.Errorf("audit queue: maxDiskBytes %d or segmentBytes %d is negative", c.MaxDiskBytes, c.SegmentBytes)
	}
	if c.IsNATS() {
		if c.Dir != "" || (c.Durable != nil && *c.Durable) {
			return errors.New("audit queue: nats.urls and dir (or durable: true) are exclusive: the NATS queue replaces the durable local one, unset dir and durable")
		}
		if err := c.NATS.Validate(); err != nil {
			return fmt.Errorf("audit queue: nats: %w", err)
		}
		return nil
	}
	if c.Durable != nil && *c.Durable && c.Dir == "" {
		return errors.New("audit queue: durable needs dir (or the all-in-one's data folder)")
	}
	return nil
}

// Handler processes one audit event from cluster. Calls for one object are sequential and in
// enqueue order; calls for different objects may run in parallel. ctx is cancelled when Stop gives
// up on draining, so a handler that blocks must honour it.
type Handler func(ctx context.Context, cluster string, ev *auditv1.Event)

// Queue is a bounded in-process queue of audit events, partitioned by object: the events of one
// object (cluster, group, resource, namespace and name; the API version and subresource left out)
// always go to the same partition and are handled in order by that partition's goroutine, while
// different partitions run in parallel. Events without an objectRef are spread by audit ID.
//
// A create with generateName names no object in its objectRef: it is partitioned by the object
// its response names, as the consumer names it, so it stays in order with the object's later
// events.
//
// Enqueue and EnqueueWait may be called before Start; the events wait for Start.
type memQueue struct {
	capacity int64
	maxBytes int64
	handler  Handler
	logger   *slog.Logger
	parts    []*partition

	// size counts events accepted and not yet handled or abandoned; bytes their EventBytes.
	size  atomic.Int64
	bytes atomic.Int64

	// stateMu orders Enqueue (read lock while pushing) against Start and Stop (write lock), so
	// that nothing is pushed once Stop has begun.
	stateMu  sync.RWMutex
	started  bool
	stopped  bool
	stopping chan struct{} // closed when Stop begins
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	done     chan struct{} // closed when every worker exited

	aborted   atomic.Bool
	abortOnce sync.Once
	stopOnce  sync.Once
	abandoned atomic.Int64

	unregisterOnce sync.Once

	// room wakes EnqueueWait callers: when capacity is released and somebody waits, roomCh is
	// closed and replaced.
	roomMu      sync.Mutex
	roomCh      chan struct{}
	roomWaiters atomic.Int32

	accepted      metric.Int64Counter
	rejected      metric.Int64Counter
	rejectedFull  metric.MeasurementOption
	rejectedStop  metric.MeasurementOption
	dropped       metric.Int64Counter
	droppedStop   metric.MeasurementOption
	depthCallback metric.Registration
	bytesCallback metric.Registration
	limitCallback metric.Registration
}

type queued struct {
	cluster string
	ev      *auditv1.Event
	bytes   int64
	// track, if set, counts the handled events of the batch the event came in (durable queue).
	track *batchTrack
}

// batchTrack counts the events of one enqueued batch not yet handled and calls done once all of
// them were. Events abandoned at Stop are never counted as handled.
type batchTrack struct {
	remaining atomic.Int64
	done      func()
}

func newBatchTrack(n int, done func()) *batchTrack {
	t := &batchTrack{done: done}
	t.remaining.Store(int64(n))
	return t
}

func (t *batchTrack) eventDone() {
	if t.remaining.Add(-1) == 0 {
		t.done()
	}
}

type partition struct {
	mu       sync.Mutex
	items    []queued
	closed   bool          // no more items will come: the worker exits when items is empty
	wake     chan struct{} // capacity 1: signalled when items becomes non-empty or closed is set
	enqueued uint64        // items pushed so far
	finished uint64        // items handled or abandoned so far
	waiters  []flushWaiter
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

// newMemory returns a queue that passes events to h; ts gives its logger and meter provider
// (either may be unset).
func newMemory(cfg Config, d Deps) (*memQueue, error) {
	h, ts := d.Handle, d.Telemetry
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("audit queue: nil handler")
	}
	cfg = cfg.WithDefaults()
	q := &memQueue{
		capacity: int64(cfg.Capacity),
		maxBytes: cfg.MaxBytes,
		handler:  h,
		logger:   ts.Log().With("component", "audit.queue"),
		parts:    make([]*partition, cfg.Partitions),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		roomCh:   make(chan struct{}),
	}
	for i := range q.parts {
		q.parts[i] = &partition{wake: make(chan struct{}, 1)}
	}

	meter := instrument.NewMeter(ts, meterName)
	q.rejectedFull = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "full")))
	q.rejectedStop = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "stopped")))
	q.droppedStop = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "stopped")))
	q.accepted = meter.Counter("kelemetry.audit.queue.accepted", "Audit events accepted by the queue.", "{event}", *attribute.EmptySet())
	// A refused batch stays with its sender (the webhook answers 429 or 503 and kube-apiserver
	// retries; replay and follow wait): it is rejected, not lost. Only events the queue had
	// accepted and then abandoned at shutdown are dropped.
	q.rejected = meter.Counter("kelemetry.audit.queue.rejected",
		"Audit events the queue refused (full or stopping), by reason; their sender keeps them.", "{event}",
		attribute.NewSet(attribute.String("reason", "full")), attribute.NewSet(attribute.String("reason", "stopped")))
	q.dropped = meter.Counter("kelemetry.audit.queue.dropped",
		"Audit events the queue had accepted and abandoned at shutdown (lost), by reason.", "{event}",
		attribute.NewSet(attribute.String("reason", "stopped")))
	q.depthCallback = meter.Gauge("kelemetry.audit.queue.depth", "Audit events queued or being handled.", "{event}",
		func() (int64, bool) { return q.size.Load(), true })
	q.bytesCallback = meter.Gauge("kelemetry.audit.queue.bytes",
		"Estimated bytes of the audit events queued or being handled (bounded by audit.queue.maxBytes).", "By",
		func() (int64, bool) { return q.bytes.Load(), true })
	q.limitCallback = meter.Gauge("kelemetry.audit.queue.max_bytes",
		"The bound of kelemetry.audit.queue.bytes (audit.queue.maxBytes): the webhook answers 429 when a batch does not fit.", "By",
		func() (int64, bool) { return q.maxBytes, true })
	if err := meter.Err(); err != nil {
		return nil, fmt.Errorf("audit queue: %w", err)
	}
	return q, nil
}

// Len returns the number of events accepted and not yet handled (those being handled included).
func (q *memQueue) Len() int { return int(q.size.Load()) }

// Bytes returns the estimated bytes (EventBytes) of the events Len counts.
func (q *memQueue) Bytes() int64 { return q.bytes.Load() }

// Enqueue adds a batch of events from cluster, all of them or none: if the batch does not fit in
// the remaining capacity (events, or bytes), it returns an error wrapping ErrFull and queues nothing, so a retry
// of the whole batch duplicates nothing. A batch larger than the whole capacity also wraps
// ErrBatchTooLarge. Once Stop has begun, Enqueue returns ErrStopped. It never blocks.
func (q *memQueue) Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.EnqueueReleasing(ctx, cluster, events, nil)
}

// EnqueueReleasing is Enqueue that calls release, when not nil, once every event of the batch
// was handled (bodybuf.ReleasingEnqueuer), so that the webhook reuses the body they were decoded
// from.
func (q *memQueue) EnqueueReleasing(ctx context.Context, cluster string, events []*auditv1.Event, release func()) error {
	var tr *batchTrack
	if release != nil {
		tr = newBatchTrack(len(events), release)
	}
	err := q.tryEnqueue(cluster, events, tr)
	q.record(ctx, len(events), err)
	return err
}

// EnqueueWait is Enqueue that waits, honouring ctx, until the batch fits instead of rejecting it.
// Use it where backpressure beats dropping, e.g. replaying a file. It still fails at once with
// ErrBatchTooLarge or ErrStopped.
func (q *memQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	return q.enqueueWait(ctx, cluster, events, nil)
}

// enqueueTracked is Enqueue, or EnqueueWait if wait is set, with every event counted in tr once
// handled.
func (q *memQueue) enqueueTracked(ctx context.Context, cluster string, events []*auditv1.Event, tr *batchTrack, wait bool) error {
	if wait {
		return q.enqueueWait(ctx, cluster, events, tr)
	}
	err := q.tryEnqueue(cluster, events, tr)
	q.record(ctx, len(events), err)
	return err
}

func (q *memQueue) enqueueWait(ctx context.Context, cluster string, events []*auditv1.Event, tr *batchTrack) error {
	err := q.tryEnqueue(cluster, events, tr)
	for errors.Is(err, ErrFull) && !errors.Is(err, ErrBatchTooLarge) {
		// Take the signal channel before trying again, so that a release between the attempt and
		// the wait is not missed.
		q.roomWaiters.Add(1)
		q.roomMu.Lock()
		room := q.roomCh
		q.roomMu.Unlock()
		if err = q.tryEnqueue(cluster, events, tr); !errors.Is(err, ErrFull) {
			q.roomWaiters.Add(-1)
			break
		}
		select {
		case <-room:
		case <-q.stopping:
		case <-ctx.Done():
			q.roomWaiters.Add(-1)
			return fmt.Errorf("wait for room in audit queue: %w", ctx.Err())
		}
		q.roomWaiters.Add(-1)
		err = q.tryEnqueue(cluster, events, tr)
	}
	q.record(ctx, len(events), err)
	return err
}

func (q *memQueue) record(ctx context.Context, n int, err error) {
	switch {
	case n == 0:
	case err == nil:
		q.accepted.Add(ctx, int64(n))
	case errors.Is(err, ErrStopped):
		q.rejected.Add(ctx, int64(n), q.rejectedStop)
	case errors.Is(err, ErrFull):
		q.rejected.Add(ctx, int64(n), q.rejectedFull)
	}
}

func (q *memQueue) tryEnqueue(cluster string, events []*auditv1.Event, tr *batchTrack) error {
	n := int64(len(events))
	if n > q.capacity {
		return fmt.Errorf("%w (%w): a batch of %d events can never fit the capacity of %d",
			ErrBatchTooLarge, ErrFull, n, q.capacity)
	}
	var nb int64
	for i, ev := range events {
		if ev == nil {
			return fmt.Errorf("audit queue: event %d of the batch is nil", i)
		}
		nb += auditv1.EventBytes(ev)
	}
	if nb > q.maxBytes {
		return fmt.Errorf("%w (%w): a batch of %d bytes can never fit the queue's maxBytes of %d",
			ErrBatchTooLarge, ErrFull, nb, q.maxBytes)
	}
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	if q.stopped {
		return ErrStopped
	}
	if n == 0 {
		return nil
	}
	for {
		cur := q.size.Load()
		if cur+n > q.capacity {
			return fmt.Errorf("%w: %d of %d places taken, batch of %d", ErrFull, cur, q.capacity, n)
		}
		if q.size.CompareAndSwap(cur, cur+n) {
			break
		}
	}
	for {
		cur := q.bytes.Load()
		if cur+nb > q.maxBytes {
			q.release(-n, 0)
			return fmt.Errorf("%w: %d of %d bytes taken, batch of %d bytes", ErrFull, cur, q.maxBytes, nb)
		}
		if q.bytes.CompareAndSwap(cur, cur+nb) {
			break
		}
	}
	for _, ev := range events {
		p := q.parts[auditv1.PartitionIndex(cluster, ev, len(q.parts))]
		p.mu.Lock()
		p.items = append(p.items, queued{cluster: cluster, ev: ev, bytes: auditv1.EventBytes(ev), track: tr})
		p.enqueued++
		wasEmpty := len(p.items) == 1
		p.mu.Unlock()
		if wasEmpty {
			p.signal()
		}
	}
	return nil
}

func (p *partition) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Start starts one goroutine per partition. It does not block.
func (q *memQueue) Start(_ context.Context) error {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	switch {
	case q.stopped:
		return fmt.Errorf("start audit queue: %w", ErrStopped)
	case q.started:
		return errors.New("start audit queue: already started")
	}
	q.started = true
	// The workers' context is not the caller's: it lives until Stop gives up on draining.
	runCtx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	q.workers.Add(len(q.parts))
	for _, p := range q.parts {
		go q.run(runCtx, p)
	}
	go func() {
		q.workers.Wait()
		close(q.done)
	}()
	return nil
}

// Stop stops accepting events, lets the workers handle everything already queued, and returns once
// they have exited. If ctx expires first, Stop cancels the handlers' context, abandons what is left
// (counted as dropped with reason=stopped), waits for the workers to exit and returns an error
// wrapping ctx's. Stop without Start abandons whatever was enqueued. Stop may be called more than
// once.
func (q *memQueue) Stop(ctx context.Context) error {
	q.stateMu.Lock()
	q.stopped = true
	started := q.started
	q.stateMu.Unlock()

	q.stopOnce.Do(func() {
		close(q.stopping)
		if !started {
			close(q.done)
		}
		for _, p := range q.parts {
			p.mu.Lock()
			p.closed = true
			p.mu.Unlock()
			p.signal()
		}
	})

	var err error
	select {
	case <-q.done:
	default:
		select {
		case <-q.done:
		case <-ctx.Done():
			q.abortOnce.Do(func() {
				q.aborted.Store(true)
				if q.cancel != nil {
					q.cancel()
				}
				for _, p := range q.parts {
					p.signal()
				}
			})
			<-q.done
			err = ctx.Err()
		}
	}
	// Metrics recorded below must not be lost because ctx expired.
	mctx := context.WithoutCancel(ctx)
	// Whatever is still queued now has no worker: abandon it (only without Start, or after an
	// abort).
	for _, p := range q.parts {
		p.mu.Lock()
		n, nb := len(p.items), sumBytes(p.items)
		clear(p.items)
		p.items = p.items[:0]
		p.mu.Unlock()
		if n > 0 {
			q.finish(mctx, p, n, nb, true)
		}
	}
	if q.cancel != nil {
		q.cancel()
	}
	if n := q.abandoned.Load(); n > 0 {
		if err == nil {
			err = ErrStopped
		}
		err = fmt.Errorf("stop audit queue: %d events abandoned: %w", n, err)
	} else if err != nil {
		err = fmt.Errorf("stop audit queue: %w", err)
	}
	q.unregisterOnce.Do(func() {
		if uerr := errors.Join(q.depthCallback.Unregister(), q.bytesCallback.Unregister(), q.limitCallback.Unregister()); uerr != nil {
			q.logger.Debug("unregister queue gauges", "error", uerr)
		}
	})
	return err
}

// Flush waits until every event enqueued before the call has been handled. It returns ctx's error
// if ctx expires first, and an error wrapping ErrStopped if Stop abandoned events. Before Start it
// waits for Start.
func (q *memQueue) Flush(ctx context.Context) error {
	var waits []chan struct{}
	for _, p := range q.parts {
		p.mu.Lock()
		if p.finished < p.enqueued {
			ch := make(chan struct{})
			p.waiters = append(p.waiters, flushWaiter{target: p.enqueued, ch: ch})
			waits = append(waits, ch)
		}
		p.mu.Unlock()
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush audit queue: %w", ctx.Err())
		}
	}
	if q.aborted.Load() || q.abandoned.Load() > 0 {
		return fmt.Errorf("flush audit queue: events were abandoned: %w", ErrStopped)
	}
	return nil
}

// releaseEvery bounds how many handled events a worker accounts for at once.
const releaseEvery = 64

func (q *memQueue) run(ctx context.Context, p *partition) {
	defer q.workers.Done()
	var batch []queued
	for {
		p.mu.Lock()
		for len(p.items) == 0 {
			if p.closed || q.aborted.Load() {
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
		}
		if q.aborted.Load() {
			p.mu.Unlock()
			return
		}
		// Swap buffers: the worker handles the taken items while enqueuers fill the other one.
		batch, p.items = p.items, batch[:0]
		p.mu.Unlock()

		pending, pendingBytes := 0, int64(0)
		for i := range batch {
			if q.aborted.Load() {
				q.finish(ctx, p, pending, pendingBytes, false)
				q.finish(ctx, p, len(batch)-i, sumBytes(batch[i:]), true)
				clear(batch)
				return
			}
			q.call(ctx, batch[i])
			// A handler interrupted by an abort may not have finished: its batch is not done.
			if batch[i].track != nil && !q.aborted.Load() {
				batch[i].track.eventDone()
			}
			pendingBytes += batch[i].bytes
			batch[i] = queued{}
			if pending++; pending == releaseEvery {
				q.finish(ctx, p, pending, pendingBytes, false)
				pending, pendingBytes = 0, 0
			}
		}
		q.finish(ctx, p, pending, pendingBytes, false)
	}
}

func (q *memQueue) call(ctx context.Context, it queued) {
	defer func() {
		if r := recover(); r != nil {
			q.logger.Error("audit event handler panicked", "panic", r, "cluster", it.cluster, "auditID", it.ev.AuditID)
		}
	}()
	q.handler(ctx, it.cluster, it.ev)
}

func sumBytes(items []queued) int64 {
	var n int64
	for _, it := range items {
		n += it.bytes
	}
	return n
}

// release gives back n events and nb bytes of capacity (both negative) and wakes EnqueueWait
// callers.
func (q *memQueue) release(n, nb int64) {
	q.size.Add(n)
	q.bytes.Add(nb)
	if q.roomWaiters.Load() > 0 {
		q.roomMu.Lock()
		close(q.roomCh)
		q.roomCh = make(chan struct{})
		q.roomMu.Unlock()
	}
}

// finish accounts for n events (nb bytes) of p that were handled or, if abandoned, dropped: it
// wakes Flush and EnqueueWait callers.
func (q *memQueue) finish(ctx context.Context, p *partition, n int, nb int64, abandoned bool) {
	if n == 0 {
		return
	}
	if abandoned {
		q.abandoned.Add(int64(n))
		q.dropped.Add(ctx, int64(n), q.droppedStop)
	}
	// Release the capacity before waking Flush, so that Len is 0 once Flush returns on an idle queue.
	q.release(-int64(n), -nb)

	p.mu.Lock()
	p.finished += uint64(n)
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.target <= p.finished {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
	p.mu.Unlock()
}
