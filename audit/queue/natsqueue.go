package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kelemetry/kelemetry/audit/auditv1"
	"github.com/kelemetry/kelemetry/audit/queue/internal/natslog"
	"github.com/kelemetry/kelemetry/internal/instrument"
	"github.com/kelemetry/kelemetry/natsqueue"
	"github.com/kelemetry/kelemetry/telemetry"
)

// NATS queue is the Queue on NATS JetStream (package natsqueue), for several ingest replicas
// behind one Service and for surviving restarts and rolling updates. Every replica with it both
// publishes and consumes:
//
//   - Enqueue encodes each event of the batch as one message (the durable queue's record format)
//     on the subject of its object's partition (<prefix>.<cluster>.<partition>, the object as
//     Queue partitions it), with the message ID <cluster>/<auditID>/<stage> so that JetStream
//     drops a copy published again within its duplicate window (a retried batch stores nothing
//     twice), and returns once JetStream acknowledged every message. A stream at its limits
//     gives an error wrapping ErrFull (the webhook answers 429 with Retry-After); NATS or a
//     JetStream quorum out of reach gives ErrUnavailable (503 with Retry-After).
//   - A natslog.Consumer handles each partition on one replica at a time, in order, in
//     batches of the messages it pulled and has at hand: every message is decoded and handed to
//     the Handler, then the sinks sync once for the batch (Deps.Sync; a failed sync is retried,
//     the messages stay unacknowledged), then the batch's messages are acknowledged, as the
//     durable queue marks a batch done. A message redelivered after a crash is handled again,
//     which stores nothing twice (event span IDs are deterministic, the stores upsert). A
//     message that does not decode goes to the dead-letter stream after NATS.MaxDeliveries
//     attempts.
//
// Flush waits until JetStream holds none of the messages this process published before the call
// unacknowledged, whichever replica consumes them. Len counts the events being published and
// what the stream still holds for this replica's partitions (natslog.Consumer.Backlog: every
// partition during about PinnedTTL after the start, until the membership settled; the answer is
// reused for a second unless this process published since, and waited for 500 ms at most), so
// that /healthz's queueDepth 0 means this replica has caught up. Bytes counts what this process holds in memory: events being published and events
// being handled.
type natsQueue struct {
	cfg    natsqueue.Config
	h      Handler
	ts     telemetry.Settings
	logger *slog.Logger

	sinkSync *groupSync
	// warm, when set, rebuilds the consumer's state on a partition takeover (Deps.Warm).
	warm Handler
	// stored, when set, tells which redelivered events the sinks hold already (Deps.Stored).
	stored StoredFunc

	// mu orders Enqueue (read lock while publishing) against Start and Stop.
	mu      sync.RWMutex
	prod    *natslog.Producer
	cons    *natslog.Consumer
	stopped bool

	publishing atomic.Int64 // events being published
	handling   atomic.Int64 // events being handled
	bytes      atomic.Int64 // their EventBytes

	// published counts the Enqueue calls that ended: an answer of the stream asked before the
	// last one may miss its messages (backlogCache).
	published atomic.Uint64
	// backlogOf asks the stream what it holds for this replica (Consumer.Backlog): set by Start,
	// cleared by Stop (atomic: Len does not wait for q.mu, which Stop takes after the publishes).
	backlogOf atomic.Pointer[backlogFunc]
	backlog   backlogCache
	// backlogTTL is how long Len reuses the stream's answer; backlogTimeout bounds the wait for it.
	backlogTTL     time.Duration
	backlogTimeout time.Duration

	accepted     metric.Int64Counter
	rejected     metric.Int64Counter
	rejectFull   metric.MeasurementOption
	rejectUnav   metric.MeasurementOption
	rejectStop   metric.MeasurementOption
	rejectOther  metric.MeasurementOption
	syncFails    metric.Int64Counter
	corrupt      metric.Int64Counter
	gauges       []metric.Registration
	unregister   sync.Once
	flushPollGap time.Duration
}

// newNATS returns a queue on the JetStream of cfg that passes events to d.Handle. It does not
// connect: Start does.
func newNATS(cfg natsqueue.Config, d Deps) (*natsQueue, error) {
	h, ts := d.Handle, d.Telemetry
	if h == nil {
		return nil, errors.New("audit queue: nil handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("audit queue: nats: %w", err)
	}
	cfg = cfg.WithDefaults()
	q := &natsQueue{cfg: cfg, h: h, ts: ts, warm: d.Warm, stored: d.Stored, flushPollGap: 20 * time.Millisecond,
		backlogTTL: time.Second, backlogTimeout: 500 * time.Millisecond,
		logger: ts.Log().With("component", "audit.queue", "stream", cfg.Stream)}
	if d.Sync != nil {
		q.sinkSync = newGroupSync(d.Sync)
	}
	meter := instrument.NewMeter(ts, meterName)
	q.accepted = meter.Counter("kelemetry.audit.queue.accepted", "Audit events accepted by the queue.", "{event}", *attribute.EmptySet())
	reasons := instrument.Sets("reason", "full", "unavailable", "stopped", "error")
	q.rejected = meter.Counter("kelemetry.audit.queue.rejected",
		"Audit events the queue refused (full, unavailable, stopped, error: an event larger than NATS's max_payload among others), by reason; their sender keeps them.", "{event}",
		reasons...)
	q.rejectFull = metric.WithAttributeSet(reasons[0])
	q.rejectUnav = metric.WithAttributeSet(reasons[1])
	q.rejectStop = metric.WithAttributeSet(reasons[2])
	q.rejectOther = metric.WithAttributeSet(reasons[3])
	q.syncFails = meter.Counter("kelemetry.audit.queue.sink_sync_failures",
		"Failed syncs of the sinks before acknowledging queued audit events (they are retried).", "{sync}", *attribute.EmptySet())
	q.corrupt = meter.Counter("kelemetry.audit.queue.corrupt_records",
		"Queued audit records that did not decode (NATS: retried, then dead-lettered).", "{record}", *attribute.EmptySet())
	q.gauges = append(q.gauges,
		meter.Gauge("kelemetry.audit.queue.depth", "Audit events queued or being handled (NATS: being published or handled by this process).", "{event}",
			func() (int64, bool) { return q.publishing.Load() + q.handling.Load(), true }),
		meter.Gauge("kelemetry.audit.queue.bytes", "Estimated bytes of the audit events the depth counts.", "By",
			func() (int64, bool) { return q.bytes.Load(), true }),
	)
	if err := meter.Err(); err != nil {
		q.unregisterGauges()
		return nil, fmt.Errorf("audit queue: %w", err)
	}
	return q, nil
}

// StoredFunc reports, for each of evs (from cluster), whether the sinks already hold what handling
// it writes (Consumer.Stored).
type StoredFunc func(ctx context.Context, cluster string, evs []*auditv1.Event) ([]bool, error)

// storedMsgs is the natsqueue.StoredCheck: it decodes the messages and asks the StoredFunc, one
// call per cluster; a message is stored when every event of it is (one that does not decode is
// not: it is handled, and dead-lettered).
func (q *natsQueue) storedMsgs(ctx context.Context, ds []natslog.Delivery) ([]bool, error) {
	out := make([]bool, len(ds))
	byCluster := map[string][]*auditv1.Event{}
	owners := map[string][]int{}
	counts := make([]int, len(ds))
	for i, d := range ds {
		cluster, events, err := decodeBatch(d.Payload)
		if err != nil || len(events) == 0 {
			continue
		}
		counts[i] = len(events)
		for _, ev := range events {
			byCluster[cluster] = append(byCluster[cluster], ev)
			owners[cluster] = append(owners[cluster], i)
		}
	}
	found := make([]int, len(ds))
	for cluster, evs := range byCluster {
		has, err := q.stored(ctx, cluster, evs)
		if err != nil {
			return nil, err
		}
		if len(has) != len(evs) {
			return nil, fmt.Errorf("stored check: %d answers for %d events", len(has), len(evs))
		}
		for j, h := range has {
			if h {
				found[owners[cluster][j]]++
			}
		}
	}
	for i := range ds {
		out[i] = counts[i] > 0 && found[i] == counts[i]
	}
	return out, nil
}

// warmMsg is the natsqueue.Warmer: it decodes a message handled before the takeover and passes
// its events to the warmer; a message that does not decode is counted and skipped.
func (q *natsQueue) warmMsg(ctx context.Context, d natslog.Delivery) {
	cluster, events, err := decodeBatch(d.Payload)
	if err != nil {
		q.corrupt.Add(ctx, 1)
		return
	}
	for _, ev := range events {
		q.warm(ctx, cluster, ev)
	}
}

// Start connects to NATS, creates or updates the streams and the partitions' consumers, and
// starts consuming. It fails when NATS cannot be reached before ctx ends.
func (q *natsQueue) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopped {
		return fmt.Errorf("start audit queue: %w", ErrStopped)
	}
	if q.prod != nil {
		return nil
	}
	prod, err := natslog.NewProducer(ctx, q.cfg, q.ts)
	if err != nil {
		return fmt.Errorf("start audit queue on NATS: %w", err)
	}
	var opts []natslog.ConsumerOption
	if q.warm != nil {
		opts = append(opts, natslog.WithWarmer(q.warmMsg))
	}
	if q.sinkSync != nil {
		opts = append(opts, natslog.WithCommitter(q.commit))
	}
	if q.stored != nil {
		opts = append(opts, natslog.WithStoredCheck(q.storedMsgs))
	}
	cons, err := natslog.NewConsumer(ctx, q.cfg, q.handle, q.ts, opts...)
	if err != nil {
		prod.Close()
		return fmt.Errorf("start audit queue on NATS: %w", err)
	}
	if err := cons.Start(ctx); err != nil {
		_ = cons.Stop(ctx)
		prod.Close()
		return fmt.Errorf("start audit queue on NATS: %w", err)
	}
	q.prod, q.cons = prod, cons
	backlogOf := backlogFunc(cons.Backlog)
	q.backlogOf.Store(&backlogOf)
	return nil
}

// Stop stops accepting batches (ErrStopped), waits for the publishes and the handlers in
// progress, hands this replica's partitions to a standby and closes the connections. Messages
// not acknowledged stay in the stream for the next consumer. It is safe without Start and more
// than once.
func (q *natsQueue) Stop(ctx context.Context) error {
	q.mu.Lock()
	q.stopped = true
	prod, cons := q.prod, q.cons
	q.prod, q.cons = nil, nil
	q.backlogOf.Store(nil)
	q.mu.Unlock()
	var err error
	if cons != nil {
		err = cons.Stop(ctx)
	}
	if prod != nil {
		prod.Close()
	}
	q.unregisterGauges()
	return err
}

func (q *natsQueue) unregisterGauges() {
	q.unregister.Do(func() {
		for _, g := range q.gauges {
			_ = g.Unregister()
		}
	})
}

// Len returns the events accepted and not handled yet that are this replica's: those this
// process is publishing, plus the messages the stream still holds for the partitions this
// replica owns or holds (natslog.Backlog; every partition until the membership settled, about
// PinnedTTL after the start, so that a replica that has not claimed its partitions yet does not
// read 0), or the events it is handling when that is more. A message leaves the stream only
// once it was handled and its sinks synced, so with no new batches 0 means caught up.
//
// It serves /healthz, so it is cheap and bounded: the stream's answer is reused for a second
// unless this process published since, and asking waits 500 ms at most. When the stream cannot
// be asked it reports the last answer, at least 1 (not known to be caught up). A batch another
// replica published shows within a second. Before Start and after Stop it counts this process's
// events only.
func (q *natsQueue) Len() int {
	// The local counts first: a publish that ends after them bumps q.published, so the stream
	// is asked again and counts its messages.
	n := int(q.publishing.Load())
	handling := int(q.handling.Load())
	backlogOf := q.backlogOf.Load()
	if backlogOf == nil {
		return n + handling
	}
	return n + max(handling, q.streamBacklog(*backlogOf))
}

// backlogFunc asks the stream what it holds for this replica.
type backlogFunc func(context.Context) (natslog.Backlog, error)

// backlogCache holds the stream's last answer for Len.
type backlogCache struct {
	mu  sync.Mutex
	at  time.Time // when it was asked for; zero before the first time
	gen uint64    // q.published when it was asked for
	n   int
}

// streamBacklog returns the messages the stream holds for this replica: the cached answer while
// it is younger than backlogTTL and nothing was published since it was asked for, else a new
// one, waiting backlogTimeout at most. Concurrent callers share one request.
func (q *natsQueue) streamBacklog(backlogOf backlogFunc) int {
	c := &q.backlog
	c.mu.Lock()
	defer c.mu.Unlock()
	gen := q.published.Load()
	if !c.at.IsZero() && c.gen == gen && time.Since(c.at) < q.backlogTTL {
		return c.n
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.backlogTimeout)
	defer cancel()
	b, err := backlogOf(ctx)
	if err != nil {
		// Unknown is not caught up. (Health says when the connection is down.)
		q.logger.Debug("ask the stream for this replica's backlog", "err", err)
		c.n = max(c.n, 1)
	} else {
		c.n = b.Messages
	}
	c.at, c.gen = time.Now(), gen
	return c.n
}

// Bytes returns the estimated memory (EventBytes) of the events this process holds: being
// published or being handled. The stream's messages that Len also counts are not in memory.
func (q *natsQueue) Bytes() int64 { return q.bytes.Load() }

// Enqueue publishes the batch, one message per event, and returns once JetStream acknowledged
// all of them. Errors wrap ErrFull (the stream is at its limits; a message larger than
// NATS allows also wraps ErrBatchTooLarge), ErrUnavailable (NATS unreachable, or not
// started) or ErrStopped. After an error some events of the batch may be in the stream: the
// sender's retry of the whole batch stores them once (message IDs).
func (q *natsQueue) Enqueue(ctx context.Context, cluster string, events []*auditv1.Event) error {
	if len(events) == 0 {
		return nil
	}
	for i, ev := range events {
		if ev == nil {
			return fmt.Errorf("audit queue: event %d of the batch is nil", i)
		}
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	n := int64(len(events))
	if q.stopped {
		q.rejected.Add(ctx, n, q.rejectStop)
		return ErrStopped
	}
	if q.prod == nil {
		q.rejected.Add(ctx, n, q.rejectUnav)
		return fmt.Errorf("%w: not connected to NATS yet", ErrUnavailable)
	}
	msgs := make([]natslog.Message, len(events))
	var nb int64
	for i, ev := range events {
		nb += auditv1.EventBytes(ev)
		msgs[i] = natslog.Message{Cluster: cluster, Key: auditv1.PartitionKey(ev), ID: natsMsgID(cluster, ev),
			Payload: appendBatch(make([]byte, 0, batchSizeHint(events[i:i+1])), cluster, events[i:i+1])}
	}
	q.hold(&q.publishing, n, nb)
	err := q.prod.Publish(ctx, msgs)
	// The stream may hold some messages even after an error: Len asks it again, and only then
	// stops counting them here.
	q.published.Add(1)
	q.hold(&q.publishing, -n, -nb)
	if err != nil {
		return q.publishError(ctx, n, err)
	}
	q.accepted.Add(ctx, n)
	return nil
}

// publishError maps a natsqueue error to the queue's errors and counts the refusal.
func (q *natsQueue) publishError(ctx context.Context, n int64, err error) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		q.rejected.Add(ctx, n, q.rejectOther)
		return fmt.Errorf("%w: %w: an event is larger than NATS's max_payload: %w", ErrFull, ErrBatchTooLarge, err)
	case errors.Is(err, natslog.ErrFull):
		q.rejected.Add(ctx, n, q.rejectFull)
		return fmt.Errorf("%w: %w", ErrFull, err)
	case errors.Is(err, natslog.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		q.rejected.Add(ctx, n, q.rejectUnav)
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	default:
		q.rejected.Add(ctx, n, q.rejectOther)
		return fmt.Errorf("audit queue: %w", err)
	}
}

// EnqueueWait is Enqueue that retries, with a backoff and honouring ctx, while the stream is full
// or NATS is unavailable. It still fails at once with ErrBatchTooLarge or ErrStopped.
func (q *natsQueue) EnqueueWait(ctx context.Context, cluster string, events []*auditv1.Event) error {
	backoff := 50 * time.Millisecond
	for {
		err := q.Enqueue(ctx, cluster, events)
		if err == nil || errors.Is(err, ErrBatchTooLarge) ||
			(!errors.Is(err, ErrFull) && !errors.Is(err, ErrUnavailable)) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for room in the audit queue: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Flush waits until every message this process published before the call was acknowledged by a
// consumer (of any replica) or dead-lettered: JetStream keeps a message only until then, so
// Flush polls the stream until its first sequence is past the last one published here.
func (q *natsQueue) Flush(ctx context.Context) error {
	q.mu.RLock()
	prod := q.prod
	q.mu.RUnlock()
	if prod == nil {
		return nil
	}
	seq := prod.LastSequence()
	if seq == 0 {
		return nil
	}
	for {
		done, err := prod.Consumed(ctx, seq)
		if err == nil && done {
			return nil
		}
		t := time.NewTimer(q.flushPollGap)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("flush audit queue: %w (last: %w)", ctx.Err(), err)
			}
			return fmt.Errorf("flush audit queue: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// Health returns nil while the connection to NATS is up, else an error wrapping
// ErrUnavailable that says why (for /healthz).
func (q *natsQueue) Health(context.Context) error {
	q.mu.RLock()
	prod, stopped := q.prod, q.stopped
	q.mu.RUnlock()
	switch {
	case stopped:
		return ErrStopped
	case prod == nil:
		return fmt.Errorf("%w: not connected to NATS yet", ErrUnavailable)
	}
	if err := prod.Connected(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Held returns the partitions this replica consumed a message of recently (see
// natslog.Consumer.Held); nil before Start.
func (q *natsQueue) Held() []int {
	q.mu.RLock()
	cons := q.cons
	q.mu.RUnlock()
	if cons == nil {
		return nil
	}
	return cons.Held()
}

// hold adds n events of nb bytes to count (q.publishing or q.handling).
func (q *natsQueue) hold(count *atomic.Int64, n, nb int64) {
	count.Add(n)
	q.bytes.Add(nb)
}

// handle is the natsqueue.Handler: it decodes the message and hands its events to the Handler;
// a nil return accepts the message (acknowledged after commit).
func (q *natsQueue) handle(ctx context.Context, d natslog.Delivery) error {
	cluster, events, err := decodeBatch(d.Payload)
	if err != nil {
		q.corrupt.Add(ctx, 1)
		return fmt.Errorf("decode audit message %d: %w", d.Sequence, err)
	}
	var nb int64
	for _, ev := range events {
		nb += auditv1.EventBytes(ev)
	}
	n := int64(len(events))
	q.hold(&q.handling, n, nb)
	defer q.hold(&q.handling, -n, -nb)
	for _, ev := range events {
		q.h(ctx, cluster, ev)
	}
	if err := ctx.Err(); err != nil {
		// Stopping: the handler may have given the event up; the message comes back.
		return fmt.Errorf("handle audit message %d: %w", d.Sequence, err)
	}
	return nil
}

// commit is the natsqueue.Committer: it syncs the sinks once for the messages a partition
// handled as a batch, before they are acknowledged.
func (q *natsQueue) commit(ctx context.Context) error {
	if err := q.sinkSync.do(ctx); err != nil {
		q.syncFails.Add(ctx, 1)
		return fmt.Errorf("sync sinks: %w", err)
	}
	return nil
}

// groupSync shares calls of a sync function among concurrent callers: a caller waits for a call
// that started after it arrived, and callers arriving while one runs share the next one.
type groupSync struct {
	sync    func(context.Context) error
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	next    *syncRound
}

type syncRound struct {
	finished bool
	err      error
}

func newGroupSync(fn func(context.Context) error) *groupSync {
	g := &groupSync{sync: fn}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// do returns the result of a call of the sync function that started after do was called. The
// caller that finds no call running makes it, with its ctx.
func (g *groupSync) do(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next == nil {
		g.next = &syncRound{}
	}
	r := g.next
	for !r.finished {
		if g.running {
			g.cond.Wait()
			continue
		}
		g.running = true
		g.next = nil
		g.mu.Unlock()
		err := g.sync(ctx)
		g.mu.Lock()
		r.err, r.finished = err, true
		g.running = false
		g.cond.Broadcast()
	}
	return r.err
}

// natsMsgID is the JetStream message ID of an event: cluster, audit ID and stage identify it
// (none without an audit ID).
func natsMsgID(cluster string, ev *auditv1.Event) string {
	if ev.AuditID == "" {
		return ""
	}
	return cluster + "/" + ev.AuditID + "/" + ev.Stage
}
